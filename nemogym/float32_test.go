package nemogym

import (
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var float32All = flag.Bool("float32-all", false, "check appendFloat32 against strconv on every float32 (minutes)")

func checkFloat32(t testing.TB, f float32) {
	want := strconv.AppendFloat(nil, float64(f), 'g', -1, 32)
	got := appendFloat32(nil, f)
	if string(got) != string(want) {
		t.Fatalf("%#08x: %s, strconv %s", math.Float32bits(f), got, want)
	}
}

// appendFloat32 writes what strconv writes: every kind of float32, every exponent,
// random ones, and (with -float32-all) all of them.
func TestAppendFloat32LikeStrconv(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, -0.25, -9999, -9999.5, 1e-4, 9.999999e-5, 1e-5, 123456, 999999, 1e6, 1234567,
		16777216, 16777217, 3.4028235e38, 1e-45, 1.4e-45, 1.1754942e-38, 1.1754944e-38, 100, 1000, 0.001, 2.5e-7,
		-0.3, 1.5, 33554432, 1e10, 8589934592, -2.3841858e-07} {
		checkFloat32(t, float32(f))
		checkFloat32(t, -float32(f))
	}
	for _, b := range []uint32{0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x00000007, 0x00000008, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800001, 0x4B800001} {
		checkFloat32(t, math.Float32frombits(b))
	}
	for e := range 255 { // each binade: its first, its last, and next to the first
		for _, low := range []uint32{0, 1, 2, 3, 0x7FFFFF, 0x7FFFFE, 0x400000} {
			checkFloat32(t, math.Float32frombits(uint32(e)<<23|low))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300_000 {
		checkFloat32(t, math.Float32frombits(rng.Uint32()))
		checkFloat32(t, -rng.Float32()*float32(math.Pow(10, float64(rng.IntN(10)-6))))
	}
	if !*float32All {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	bad := make(chan uint32, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got, want []byte
			for b := uint64(w); b < 1<<32; b += uint64(workers) {
				f := math.Float32frombits(uint32(b))
				got = appendFloat32(got[:0], f)
				want = strconv.AppendFloat(want[:0], float64(f), 'g', -1, 32)
				if string(got) != string(want) {
					bad <- uint32(b)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	for b := range bad {
		checkFloat32(t, math.Float32frombits(b))
	}
}

func BenchmarkAppendFloat32(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	fs := make([]float32, 4096)
	for i := range fs {
		fs[i] = -rng.Float32() * float32(math.Pow(10, float64(rng.IntN(8)-5)))
	}
	buf := make([]byte, 0, 64)
	b.Run("nemogym", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			buf = appendFloat32(buf[:0], fs[i%len(fs)])
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			buf = strconv.AppendFloat(buf[:0], float64(fs[i%len(fs)]), 'g', -1, 32)
		}
	})
}

// The subnormals, where the decimals have the fewest digits.
func TestAppendFloat32Subnormals(t *testing.T) {
	for b := uint32(0); b < 1<<23+16; b++ {
		if b < 1<<16 || b%61 == 0 || b > 1<<23-1<<10 {
			checkFloat32(t, math.Float32frombits(b))
		}
	}
}

// floatsLikeStrconv is the list appendFloats writes for fs, from strconv element by
// element.
func floatsLikeStrconv(fs []float32) string {
	b := []byte{'['}
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

// appendFloats writes each list as strconv writes its elements, whatever runs of
// plain and exponent values it holds, and plainG tells the two apart as strconv's
// 'g' format does, at both bounds of its plain notation.
func TestAppendFloatsLikeStrconv(t *testing.T) {
	check := func(fs []float32) {
		t.Helper()
		got, err := appendFloats([]byte("x"), fs)
		if err != nil {
			t.Fatalf("%v: %v", fs, err)
		}
		if want := "x" + floatsLikeStrconv(fs); string(got) != want {
			t.Fatalf("%v:\n got %s\nwant %s", fs, got, want)
		}
	}
	var edges []float32
	for _, bound := range []uint32{plainGMinBits, plainGEndBits} {
		for b := bound - 3; b <= bound+3; b++ {
			f := math.Float32frombits(b)
			plain := !strings.Contains(strconv.FormatFloat(float64(f), 'g', -1, 32), "e")
			if plainG(f) != plain {
				t.Fatalf("plainG(%v) = %v, strconv writes it in plain notation: %v", f, plainG(f), plain)
			}
			edges = append(edges, f, -f)
		}
	}
	edges = append(edges, 0, float32(math.Copysign(0, -1)), -9999, -0.4, 1.5e-7, -1e-45, 3.4028235e38, 16777217, 1e-6, 0.1)
	check(nil)
	for i, f := range edges {
		check([]float32{f})
		check(edges[i:])
		check(edges[:i])
	}
	rng := rand.New(rand.NewPCG(9, 10))
	var fs []float32
	for range 100_000 {
		fs = fs[:0]
		for range rng.IntN(12) {
			f := -rng.Float32() * float32(math.Pow(10, float64(rng.IntN(14)-8)))
			if rng.IntN(10) == 0 {
				f = math.Float32frombits(rng.Uint32()&^0x7F800000 | uint32(rng.IntN(255))<<23)
			}
			fs = append(fs, f)
		}
		check(fs)
	}
	if !*float32All {
		return
	}
	// every finite float32, in lists of 1000
	fs = fs[:0]
	for b := uint64(0); b < 1<<32; b++ {
		if b&0x7F800000 != 0x7F800000 {
			fs = append(fs, math.Float32frombits(uint32(b)))
		}
		if len(fs) == 1000 || b == 1<<32-1 {
			check(fs)
			fs = fs[:0]
		}
	}
}

// A NaN or an infinity anywhere in a list is an error: JSON has no such number.
func TestAppendFloatsNotFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, fs := range [][]float32{{bad}, {-0.5, bad}, {bad, -0.5}, {1e-7, bad, -2}} {
			if _, err := appendFloats(nil, fs); err != errNotFinite {
				t.Errorf("%v: err %v, want errNotFinite", fs, err)
			}
		}
	}
}

// BenchmarkAppendFloats writes lists of 8 logprobs (a teacher row), a quarter of them
// closer to 0 than 1e-4, with appendFloats and element by element with
// appendFloat32; ns/float is the time per value.
func BenchmarkAppendFloats(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	fs := make([]float32, 4096)
	for i := range fs {
		fs[i] = -rng.Float32() * float32(math.Pow(10, float64(rng.IntN(8)-5)))
	}
	buf := make([]byte, 0, 64<<10)
	perFloat := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(fs)), "ns/float")
	}
	b.Run("lists", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for row := range slices.Chunk(fs, 8) {
				buf, _ = appendFloats(buf, row)
			}
		}
		perFloat(b)
	})
	b.Run("elements", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for row := range slices.Chunk(fs, 8) {
				buf = append(buf, '[')
				for i, f := range row {
					if i > 0 {
						buf = append(buf, ',')
					}
					buf = appendFloat32(buf, f)
				}
				buf = append(buf, ']')
			}
		}
		perFloat(b)
	})
}
