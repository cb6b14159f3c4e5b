package nemogym

import (
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
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
