package jsonscan_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// int32sLikeJSON checks that Int32s accepts what json.Unmarshal into a []int32
// accepts, with the same values, and refuses what it refuses.
func int32sLikeJSON(t *testing.T, in string) {
	var want []int32
	wantErr := json.Unmarshal([]byte(in), &want)
	s := jsonscan.Scanner{Data: []byte(in)}
	got, err := s.Int32s()
	if err == nil {
		err = s.End()
	}
	if wantErr != nil {
		require.Error(t, err, "%q: encoding/json refuses it (%v)", in, wantErr)
		return
	}
	require.NoError(t, err, in)
	require.Equal(t, want, got, in)
}

func TestInt32s(t *testing.T) {
	for _, in := range []string{
		`null`, `[]`, ` [ ] `, `[0]`, `[1,-2, 3 ,2147483647,-2147483648]`,
		`[0,1,10]`, `[00]`, `[1 ,2]`, `[123456789,1234567890,2147483647]`, `[-0]`, `[0.0]`, `[2147483648]`, `[1.5]`, `[1e3]`, `["1"]`, `[1,]`, `[,1]`, `[1 2]`, `[null]`, `{}`, `[1`, `[-]`, `[01]`,
	} {
		int32sLikeJSON(t, in)
	}
}

// TestInt32sEveryLength reads lists whose elements have every length from one digit to
// ten, with the bytes after each element chosen to trip the eight-byte path (a digit,
// a separator or other bytes at every offset).
func TestInt32sEveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seps := []string{",", ", ", " ,", ",\n"}
	for trial := range 3000 {
		var b strings.Builder
		b.WriteByte('[')
		for i := range 1 + rng.IntN(12) {
			if i > 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			digits := 1 + rng.IntN(10)
			n := rng.Int64N(int64(math.Pow10(digits)))
			if trial%7 == 0 {
				n = -n
			}
			b.WriteString(strconv.FormatInt(n, 10))
		}
		b.WriteString([]string{"]", "] ", "]}", "]]]]]]]]]", ",]", "]\x80\x80\x80\x80\x80\x80\x80\x80"}[trial%6])
		in := b.String()
		int32sLikeJSON(t, strings.TrimRightFunc(in, func(r rune) bool { return r == '}' || r == utf8.RuneError }))
		s := jsonscan.Scanner{Data: []byte(in)}
		got, err := s.Int32s()
		var want []int32
		if json.Unmarshal([]byte(in[:s.Pos]), &want) == nil {
			require.NoError(t, err, in)
			require.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{
		`[12345678,1]`, `[0123,1,2,3,4]`, `[00,1,2,3,4,5]`, `[0,1,2,3,4,5]`, `[1234567,12345678]`, `[99999999]`, `[0,0,0,0,0,0,0]`, `[01234567]`, `[7:123456789]`,
		`[1234567a]`, `[1234567/]`, `[123456789]`, `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]`,
	} {
		int32sLikeJSON(t, in)
	}
}

func FuzzInt32s(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `null`, `[]`, `[-2147483648, 7]`, `[1.0]`, `[151643,42,7,100000,99999999]`, `[12345,123456x]`} {
		f.Add(s)
	}
	f.Fuzz(int32sLikeJSON)
}
