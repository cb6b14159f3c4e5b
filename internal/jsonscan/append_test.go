package jsonscan

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendInt32MatchesStrconv checks AppendInt32 against strconv on every id below 2·10⁶,
// on a sample up to 10⁸, and on the edges of each length and of the int32 range.
func TestAppendInt32MatchesStrconv(t *testing.T) {
	check := func(v int32) {
		if got, want := string(AppendInt32([]byte("x"), v)), "x"+strconv.Itoa(int(v)); got != want {
			t.Fatalf("AppendInt32(%d) = %q, want %q", v, got, want)
		}
	}
	for v := range int32(2_000_000) {
		check(v)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1_000_000 {
		check(rng.Int32N(100_000_000))
	}
	for p := int32(1); p <= 1e9; p *= 10 {
		check(p - 1)
		check(p)
		check(-p)
	}
	for _, v := range []int32{math.MaxInt32, math.MinInt32, 99_999_999, 100_000_000} {
		check(v)
	}
}
