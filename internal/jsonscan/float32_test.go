package jsonscan

import (
	"encoding/json"
	"flag"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

var float32All = flag.Bool("float32-all", false, "check AppendFloat32 on every float32 (minutes)")

// checkFloat32 fails t when AppendFloat32 writes f otherwise than encoding/json does,
// or NaN and ±Inf, which encoding/json refuses, otherwise than strconv does.
func checkFloat32(t *testing.T, f float32) {
	t.Helper()
	want := appendFloat32Strconv(nil, f)
	if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
		var err error
		if want, err = json.Marshal(f); err != nil {
			t.Fatalf("json.Marshal(%v): %v", f, err)
		}
	}
	if got := AppendFloat32([]byte("x"), f); string(got) != "x"+string(want) {
		t.Fatalf("AppendFloat32(%#x) = %q, want %q", math.Float32bits(f), got[1:], want)
	}
	checkFloat32List(t, f, string(want))
}

// checkFloat32List fails t when AppendFloat32s writes the list of f alone otherwise
// than as [want], or, for NaN and ±Inf, does not refuse it.
func checkFloat32List(t *testing.T, f float32, want string) {
	t.Helper()
	got, bad := AppendFloat32s([]byte("x"), []float32{f})
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		if bad != 0 || string(got) != "x" {
			t.Fatalf("AppendFloat32s([%v]) = %q, %d; want \"x\", 0", f, got, bad)
		}
		return
	}
	if bad != -1 || string(got) != "x["+want+"]" {
		t.Fatalf("AppendFloat32s([%#x]) = %q, %d; want %q, -1", math.Float32bits(f), got[1:], bad, "["+want+"]")
	}
}

// TestAppendFloat32MatchesJSON checks AppendFloat32 against encoding/json on every
// float32 in steps of 4099 bit patterns, on the neighbours of each power of 2 and of
// 10, on each exponent's smallest and largest fraction, on logprob-like values, and
// on the edges of plain notation; -float32-all checks every float32.
func TestAppendFloat32MatchesJSON(t *testing.T) {
	for b := uint64(0); b < 1<<32; b += 4099 {
		checkFloat32(t, math.Float32frombits(uint32(b)))
	}
	near := func(f float32) {
		for _, sign := range []float32{1, -1} {
			b := math.Float32bits(f * sign)
			for d := range uint32(9) {
				checkFloat32(t, math.Float32frombits(b+d-4))
			}
		}
	}
	for e := -149; e <= 127; e++ {
		near(float32(math.Ldexp(1, e)))
	}
	for e := -45; e <= 38; e++ {
		near(float32(math.Pow(10, float64(e))))
	}
	for exp := range uint32(256) {
		for _, frac := range []uint32{0, 1, 2, 1<<23 - 2, 1<<23 - 1} {
			checkFloat32(t, math.Float32frombits(exp<<23|frac))
		}
	}
	rng := rand.New(rand.NewPCG(29, 3))
	for range 200_000 {
		checkFloat32(t, float32(-rng.ExpFloat64()*3))
	}
	for _, f := range []float32{0, float32(math.Copysign(0, -1)), 1e-6, 1e21, 0.1, 0.2, 0.3, 1, 16777216, 123456789, math.MaxFloat32, math.SmallestNonzeroFloat32} {
		near(f)
	}
}

// TestAppendFloat32All checks AppendFloat32 on every float32 (NaN and ±Inf as strconv
// writes them), and AppendFloat32s on a list of each, with -float32-all.
func TestAppendFloat32All(t *testing.T) {
	if !*float32All {
		t.Skip("set -float32-all to check every float32")
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []uint32
	for w := range workers {
		wg.Go(func() {
			var got, want, list []byte
			for b := uint64(w); b < 1<<32; b += uint64(workers) {
				f := math.Float32frombits(uint32(b))
				got, want = AppendFloat32(got[:0], f), appendFloat32Strconv(want[:0], f)
				var stop int
				list, stop = AppendFloat32s(list[:0], []float32{f})
				listOK := stop == -1 && len(list) == len(want)+2 && string(list[1:len(list)-1]) == string(want) ||
					stop == 0 && len(list) == 0 && (math.IsNaN(float64(f)) || math.IsInf(float64(f), 0))
				if string(got) != string(want) || !listOK {
					mu.Lock()
					bad = append(bad, uint32(b))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, b := range bad {
		if i == 10 {
			t.Fatalf("and %d more", len(bad)-i)
		}
		f := math.Float32frombits(b)
		list, stop := AppendFloat32s(nil, []float32{f})
		t.Errorf("AppendFloat32(%#x) = %q, AppendFloat32s of it %q, %d; want %q", b, AppendFloat32(nil, f), list, stop, appendFloat32Strconv(nil, f))
	}
	// The reference itself is encoding/json's.
	for _, b := range []uint32{0x3f800000, 0x33d6bf95, 0x7f7fffff, 0x00000001, 0x80000001, 0x60ad78ec} {
		checkFloat32(t, math.Float32frombits(b))
	}
}

func FuzzAppendFloat32(f *testing.F) {
	for _, b := range []uint32{0, 1, 0x3f800000, 0xbe99999a, 0x358637bd, 0x7f7fffff, 0x4cbebc20} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		checkFloat32(t, math.Float32frombits(b))
	})
}

// TestPow10Inv checks pow10Inv against exact arithmetic, the bounds of plain notation,
// and that shortest32's choice of k and shift holds for every exponent of a normal
// float32: the scaled interval between 1 and 10 wide, and the shift between 1 and 63.
func TestPow10Inv(t *testing.T) {
	for i, p := range pow10Inv {
		k := i - 45
		r := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
		if k <= 0 {
			r.SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-k)), nil))
		}
		if lo, hi := pow2(int(p.e2)), pow2(int(p.e2)+1); r.Cmp(lo) < 0 || r.Cmp(hi) >= 0 {
			t.Fatalf("k = %d: e2 = %d is not ⌊log₂ 10^-k⌋", k, p.e2)
		}
		scaled := new(big.Rat).Mul(r, pow2(60-int(p.e2)))
		g := new(big.Rat).SetInt(new(big.Int).SetUint64(p.g))
		diff := new(big.Rat).Sub(g, scaled)
		if diff.Sign() < 0 || diff.Cmp(big.NewRat(1, 1)) >= 0 {
			t.Fatalf("k = %d: g = %#x is not 10^-k·2^(60-e2) rounded up", k, p.g)
		}
		if exact := k <= 0 && k >= -26; exact != (diff.Sign() == 0) {
			t.Fatalf("k = %d: exact is %v, shortest32 assumes %v", k, diff.Sign() == 0, exact)
		}
	}
	if math.Float32bits(1e-6) != min1e6Bits || math.Float32bits(1e21) != min1e21Bits {
		t.Fatalf("the bits of 1e-6 and 1e21 are %#x and %#x", math.Float32bits(1e-6), math.Float32bits(1e21))
	}
	for exp := 1; exp <= 254; exp++ {
		q := exp - 150
		for _, irregular := range []bool{false, true} {
			if irregular && exp == 1 {
				continue
			}
			width := pow2(q) // the interval's width: 2^q, or ¾·2^q below a power of 2
			k := q * 1262611 >> 22
			if irregular {
				width.Mul(width, big.NewRat(3, 4))
				k = (q*1262611 - 524031) >> 22
			}
			p := pow10Inv[k+45]
			scaled := new(big.Rat).Quo(width, pow10(k))
			if scaled.Cmp(big.NewRat(1, 1)) < 0 || scaled.Cmp(big.NewRat(10, 1)) >= 0 {
				t.Fatalf("q = %d (irregular %v): k = %d scales the width to %s", q, irregular, k, scaled.FloatString(3))
			}
			if s := 62 - q - int(p.e2); s < 1 || s > 63 {
				t.Fatalf("q = %d: shift %d", q, s)
			}
		}
	}
}

func pow2(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

func pow10(k int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(k, -k))), nil)
	if k >= 0 {
		return new(big.Rat).SetInt(p)
	}
	return new(big.Rat).SetFrac(big.NewInt(1), p)
}

// BenchmarkAppendFloat32 writes logprob-like values, as the distill rows carry them,
// with AppendFloat32, with strconv, and in lists of 50 with AppendFloat32s in turns,
// and reports x-vs-strconv: strconv's time over AppendFloat32's.
func BenchmarkAppendFloat32(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, 4096)
	for i := range vals {
		vals[i] = float32(-rng.ExpFloat64() * 3)
	}
	buf := make([]byte, 0, 64<<10)
	pass := func(write func([]byte, float32) []byte) time.Duration {
		t0 := time.Now()
		buf = buf[:0]
		for _, v := range vals {
			buf = write(buf, v)
		}
		return time.Since(t0)
	}
	rows := func() time.Duration { // as the distill rows are written: lists of K = 50
		t0 := time.Now()
		buf = buf[:0]
		for row := range slices.Chunk(vals, 50) {
			buf, _ = AppendFloat32s(buf, row)
		}
		return time.Since(t0)
	}
	var own, ref, list time.Duration
	for b.Loop() {
		own += pass(AppendFloat32)
		ref += pass(appendFloat32Strconv)
		list += rows()
	}
	n := float64(b.N * len(vals))
	b.ReportMetric(float64(own.Nanoseconds())/n, "ns/value")
	b.ReportMetric(float64(list.Nanoseconds())/n, "list-ns/value")
	b.ReportMetric(float64(ref.Nanoseconds())/n, "strconv-ns/value")
	b.ReportMetric(ref.Seconds()/own.Seconds(), "x-vs-strconv")
}
