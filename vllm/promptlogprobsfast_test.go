package vllm

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// checkFastLogprob requires fastLogprob to read num (followed by a comma) as
// jsonscan's Float32 reads it: the same value, bit for bit, up to the same offset,
// and a refusal exactly where Float32 fails, or where white space comes first (which
// Float32 skips and the fast path leaves to the general one).
func checkFastLogprob(t testing.TB, num string) {
	t.Helper()
	data := []byte(num + ",")
	s := jsonscan.Scanner{Data: data}
	want, err := s.Float32()
	got, end, ok := fastLogprob(data, 0)
	if len(num) > 0 && strings.IndexByte(" \t\n\r", num[0]) >= 0 {
		if ok {
			t.Fatalf("%q: fast path read a number after white space", num)
		}
		return
	}
	if ok != (err == nil) {
		t.Fatalf("%q: fast path ok %v, Float32 error %v", num, ok, err)
	}
	if ok && (math.Float32bits(got) != math.Float32bits(want) || end != s.Pos) {
		t.Fatalf("%q: fast path %g (%#x) up to %d, Float32 %g (%#x) up to %d",
			num, got, math.Float32bits(got), end, want, math.Float32bits(want), s.Pos)
	}
}

func TestFastLogprobLikeFloat32(t *testing.T) {
	for _, num := range []string{
		"0", "-0", "-0.0", "0.0", "1", "-1", "-9999.0", "-9999", "-9999.00000", "1e5", "1E5", "1e+5",
		"1e-5", "-1.5e-3", "0.1", "-0.37", "-12.345678", "-0.123456789", "-1.2345678e-05",
		// float32 midpoints that float64 holds exactly (2^24+1, 2^24+3, 1+2^-24, 1-2^-25)
		"16777217", "16777219", "-16777217", "1.000000059604644775390625", "0.999999970197677612304688",
		"1.00000005960464477539062", "1.00000005960464477539063",
		"3.4028235e38", "3.4028236e38", "3.40282357e38", "3.5e38", "-3.5e38", "1e39",
		"1e-46", "1.4e-45", "7e-46", "1e-50", "1e-400", "1e400", "-1e999",
		"123456789012345678901234567890", "0.000000000000000000000000000001", "0.0000000000000000000001",
		"9007199254740992", "9007199254740993", "576460752303423487", "5764607523034234879", "1e22", "1e23",
		"1e-22", "1e-23", "4.5e-22", "1e99999999999999999999", "1e-99999999999999999999",
		"0.100000001490116119384765625", "-0.3699999749660491943359375",
		"-", "", "1.", ".5", "1e", "1e+", "1e-", "+1", "- 1", "01", "00", "-01", "1.5.5", "1ee5", "0x10", "NaN", "Infinity", "-Infinity",
		"1_0", "1 ", "1.e5", "1.0e", "\"1\"", "null",
	} {
		checkFastLogprob(t, num)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		x := math.Float32frombits(rng.Uint32())
		if math.IsInf(float64(x), 0) || x != x {
			continue
		}
		checkFastLogprob(t, strconv.FormatFloat(float64(x), 'g', -1, 32))
		checkFastLogprob(t, strconv.FormatFloat(float64(x), 'e', rng.IntN(14), 32))
		// halfway between x and the next float32 up, as float64 writes it (exactly),
		// and the float64s next to it
		mid := (float64(x) + float64(math.Nextafter32(x, float32(math.Inf(1))))) / 2
		checkFastLogprob(t, strconv.FormatFloat(mid, 'g', -1, 64))
		checkFastLogprob(t, strconv.FormatFloat(math.Nextafter(mid, 0), 'g', -1, 64))
		checkFastLogprob(t, strconv.FormatFloat(math.Nextafter(mid, math.Inf(1)), 'g', -1, 64))
		// a logprob as servers write it
		lp := -rng.Float64() * math.Pow(10, float64(rng.IntN(8)-4))
		checkFastLogprob(t, strconv.FormatFloat(lp, 'g', -1, 32))
		checkFastLogprob(t, strconv.FormatFloat(lp, 'f', rng.IntN(12), 64))
		// random digits, point and exponent
		digits := make([]byte, 1+rng.IntN(22))
		for i := range digits {
			digits[i] = byte('0' + rng.IntN(10))
		}
		num := string(digits)
		if p := rng.IntN(len(digits) + 1); p < len(digits) && p > 0 {
			num = num[:p] + "." + num[p:]
		}
		if rng.IntN(2) == 0 {
			num += "e" + strconv.Itoa(rng.IntN(100)-50)
		}
		checkFastLogprob(t, num)
		checkFastLogprob(t, "-"+num)
	}
}

func FuzzFastLogprob(f *testing.F) {
	for _, num := range []string{" 0", "-0.5", "16777217", "-9999.0", "1e-46", "3.5e38", "1.000000059604644775390625", "01", "1e", "-1.5e-3"} {
		f.Add(num)
	}
	f.Fuzz(func(t *testing.T, num string) {
		checkFastLogprob(t, num)
	})
}

func TestFastPositionReadsVLLMShape(t *testing.T) {
	for _, pos := range []string{
		`{}`,
		`{"872":{"logprob":-0.5,"rank":1,"decoded_token":"user"},"13":{"logprob":-1.25,"rank":2,"decoded_token":"."}}`,
		`{"198":{"logprob":-9999.0,"rank":151000,"decoded_token":"\n"},"25":{"logprob":-0.125,"rank":1,"decoded_token":null}}`,
		`{"0":{"logprob":0,"rank":null,"decoded_token":"\"\\\u00e9"},"007":{"logprob":-1e-3,"rank":999999999}}`,
		`{"5":{"logprob":-1,"rank":1,"decoded_token":""}}`,
	} {
		var p PromptLogprobs
		p.grow()
		end, ok := fastPosition([]byte(pos+","), 0, &p)
		if !ok || end != len(pos) {
			t.Errorf("%s: fast path ok %v, end %d of %d", pos, ok, end, len(pos))
		}
	}
	for _, pos := range []string{
		`{"5":{"logprob":-1,"rank":1}`,                                    // cut
		`{"5":{"logprob":-1,"rank":1} }`,                                  // white space
		`{"5":{"rank":1,"logprob":-1}}`,                                   // another order
		`{"1234567890":{"logprob":-1,"rank":1}}`,                          // ten digits
		`{"5":{"logprob":-1,"rank":0}}`,                                   // rank 0
		`{"5":{"logprob":-1,"rank":1,"decoded_token":"a` + "\x01" + `"}}`, // control character
		`{"5":{"logprob":-1,"rank":1,"decoded_token":1}}`,                 // not a string
		`{"\u0035":{"logprob":-1,"rank":1}}`,                              // escaped key
	} {
		var p PromptLogprobs
		p.grow()
		if _, ok := fastPosition([]byte(pos), 0, &p); ok || len(p.IDs) != 0 {
			t.Errorf("%s: fast path took it (%d entries)", pos, len(p.IDs))
		}
	}
}
