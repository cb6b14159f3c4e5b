package jsonscan_test

import (
	"encoding/json"
	"testing"

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

func FuzzInt32s(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `null`, `[]`, `[-2147483648, 7]`, `[1.0]`} {
		f.Add(s)
	}
	f.Fuzz(int32sLikeJSON)
}
