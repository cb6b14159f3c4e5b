package jsonscan

import (
	"encoding/json"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// checkFloat64 fails t when AppendFloat64 writes f otherwise than encoding/json does,
// or NaN and ±Inf, which encoding/json refuses, otherwise than strconv does.
func checkFloat64(t *testing.T, f float64) {
	t.Helper()
	want := appendFloat64Strconv(nil, f)
	if !math.IsNaN(f) && !math.IsInf(f, 0) {
		var err error
		if want, err = json.Marshal(f); err != nil {
			t.Fatalf("json.Marshal(%v): %v", f, err)
		}
	}
	if got := AppendFloat64([]byte("x"), f); string(got) != "x"+string(want) {
		t.Fatalf("AppendFloat64(%#x) = %q, want %q", math.Float64bits(f), got[1:], want)
	}
}

// TestAppendFloat64MatchesJSON checks AppendFloat64 against encoding/json on random
// bit patterns, on random values of the range it converts itself, on float32 values
// (as vLLM's logprobs are, and inference_logprobs carry them), on the neighbours of
// each power of 2 and of 10 and of short decimals, where the bounds of the interval
// fall on decimals, and on the edges of that range.
func TestAppendFloat64MatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 4))
	for range 500_000 {
		checkFloat64(t, math.Float64frombits(rng.Uint64()))
	}
	for range 1_000_000 {
		f := math.Exp(rng.Float64()*math.Log(1<<53/1e-6)) * 1e-6 // log-uniform over the range
		if rng.IntN(2) == 0 {
			f = -f
		}
		checkFloat64(t, f)
	}
	for range 500_000 {
		checkFloat64(t, float64(float32(-rng.ExpFloat64()*3)))
		checkFloat64(t, -rng.ExpFloat64()*3)
	}
	near := func(f float64) {
		for _, sign := range []float64{1, -1} {
			b := math.Float64bits(f * sign)
			for d := range uint64(9) {
				checkFloat64(t, math.Float64frombits(b+d-4))
			}
		}
	}
	for e := -1074; e <= 1023; e++ {
		near(math.Ldexp(1, e))
	}
	for e := -323; e <= 308; e++ {
		near(math.Pow(10, float64(e)))
	}
	for n := 1; n < 2000; n++ { // short decimals: n/10^j
		for j := 0; j <= 8; j++ {
			near(float64(n) / math.Pow(10, float64(j)))
		}
	}
	for exp := range uint64(2048) {
		for _, frac := range []uint64{0, 1, 2, 1<<52 - 2, 1<<52 - 1} {
			checkFloat64(t, math.Float64frombits(exp<<52|frac))
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-6, 1e21, 1 << 53, 1<<53 - 1, 0.1, 0.2, 0.3, 1, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		near(f)
	}
}

func FuzzAppendFloat64(f *testing.F) {
	for _, b := range []uint64{0, 1, 0x3ff0000000000000, 0xbfb999999999999a, min1e6Bits64, 0x4340000000000000, 0x7fefffffffffffff} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint64) {
		checkFloat64(t, math.Float64frombits(b))
	})
}

// TestAppendFloat64Range checks the facts AppendFloat64's own conversion rests on,
// for every exponent it takes: min1e6Bits64 is 1e-6's, k is ⌊q·log₁₀ 2⌋, 5^-k is
// exact in pow5, x·5^-k fits in 107 bits, the shift is from 1 to 63, and the scaled
// interval is at least 1 and less than 10 wide, so its integer part fits in 64 bits.
func TestAppendFloat64Range(t *testing.T) {
	if min1e6Bits64 != math.Float64bits(1e-6) {
		t.Fatalf("min1e6Bits64 = %#x, want %#x", min1e6Bits64, math.Float64bits(1e-6))
	}
	for q := int(min1e6Bits64>>52) - 1075; q <= 0; q++ {
		k := q * 1262611 >> 22
		lo := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-q))) // 2^q
		w := new(big.Rat).Mul(lo, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-k)), nil)))
		if w.Cmp(big.NewRat(1, 1)) < 0 || w.Cmp(big.NewRat(10, 1)) >= 0 {
			t.Fatalf("q = %d: k = %d gives an interval %s wide", q, k, w.FloatString(3))
		}
		p := new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(-k)), nil)
		if !p.IsUint64() || p.Uint64() != pow5[-k&31] {
			t.Fatalf("q = %d: pow5[%d] = %d, want %s", q, -k, pow5[-k&31], p)
		}
		if n := bits.Len64(1<<55-1) + p.BitLen(); n > 107 {
			t.Fatalf("q = %d: x·5^%d takes %d bits", q, -k, n)
		}
		if s := 2 - q + k; s < 1 || s > 63 {
			t.Fatalf("q = %d: shift %d", q, s)
		}
	}
}

// BenchmarkAppendFloat64 writes float32 logprobs as float64s, as inference_logprobs
// carry vLLM's sampled logprobs, with AppendFloat64 and with strconv in turns, and
// reports x-vs-strconv: strconv's time over AppendFloat64's.
func BenchmarkAppendFloat64(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = float64(float32(-rng.ExpFloat64() * 3))
	}
	buf := make([]byte, 0, 128<<10)
	pass := func(write func([]byte, float64) []byte) time.Duration {
		t0 := time.Now()
		buf = buf[:0]
		for _, v := range vals {
			buf = write(buf, v)
		}
		return time.Since(t0)
	}
	var own, ref time.Duration
	for b.Loop() {
		own += pass(AppendFloat64)
		ref += pass(appendFloat64Strconv)
	}
	n := float64(b.N * len(vals))
	b.ReportMetric(float64(own.Nanoseconds())/n, "ns/value")
	b.ReportMetric(float64(ref.Nanoseconds())/n, "strconv-ns/value")
	b.ReportMetric(ref.Seconds()/own.Seconds(), "x-vs-strconv")
}
