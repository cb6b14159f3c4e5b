package jsonscan

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// joined is the list the single-value writer write gives for vals.
func joined[T any](vals []T, write func([]byte, T) []byte) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = string(write(nil, v))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// prefixes are the destinations the list writers are checked on: none, an empty one
// with room, a full one, and one with less room than an element needs.
func prefixes() [][]byte {
	return [][]byte{nil, make([]byte, 0, 1<<12), []byte("ab"), append(make([]byte, 0, 20), "abcdefghijklmnopq"...)}
}

// TestAppendIntsMatchesStrconv checks AppendInts against strconv, element by element,
// on lists of every length up to 40 drawn from each range an id, a token or a mask
// takes (0, small, vocabulary-sized, the eight- and nine-digit edges, -100, the
// extremes of int32 and int64), written after each of prefixes.
func TestAppendIntsMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := []int64{0, 1, 9, 10, 99, 100, -1, -9, -10, -100, 151_000, 99_999_999, 100_000_000, -99_999_999, -100_000_000,
		math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1_234_567_890_123}
	draw := func() int64 {
		switch rng.IntN(3) {
		case 0:
			return pool[rng.IntN(len(pool))]
		case 1:
			return rng.Int64N(200_000)
		default:
			return rng.Int64N(1<<40) - 1<<39
		}
	}
	for n := range 41 {
		for range 50 {
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = draw()
			}
			want := joined(vals, func(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) })
			for _, pre := range prefixes() {
				head := string(pre)
				if got := string(AppendInts(pre, vals)); got != head+want {
					t.Fatalf("AppendInts(%q, %v) = %q, want %q", head, vals, got, head+want)
				}
			}
			small := make([]int32, 0, n)
			for _, v := range vals {
				if int64(int32(v)) == v {
					small = append(small, int32(v))
				}
			}
			if got, want := string(AppendInt32s([]byte("x"), small)), "x"+joined(small, AppendInt32); got != want {
				t.Fatalf("AppendInt32s(%v) = %q, want %q", small, got, want)
			}
			ints := make([]int, len(vals))
			for i, v := range vals {
				ints[i] = int(v)
			}
			if got := string(AppendInts(nil, ints)); got != want {
				t.Fatalf("AppendInts[int](%v) = %q, want %q", ints, got, want)
			}
		}
	}
}

// TestAppendFloat32sMatchesAppendFloat32 checks AppendFloat32s against AppendFloat32,
// element by element, on lists of every length up to 60 that mix logprob-like values
// with the values its own conversion leaves to AppendFloat32 (below 10^-6, from 2^24
// up, powers of 2, integers, zeros, values not normal), written after each of prefixes.
func TestAppendFloat32sMatchesAppendFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := []float32{0, float32(math.Copysign(0, -1)), 1, -1, -2, -3, 0.5, -0.25, 100, -1e-6, 9.99e-7, 1e-7, 16777216, 16777215, 16777217,
		-123456.79, 1e21, -3.4e38, math.SmallestNonzeroFloat32, -1.1754942e-38, 0.1, -0.3, -12.345678, -99999.99}
	draw := func() float32 {
		switch rng.IntN(4) {
		case 0:
			return pool[rng.IntN(len(pool))]
		case 1:
			return math.Float32frombits(rng.Uint32()&^(0xFF<<23) | uint32(rng.IntN(255))<<23) // finite, any exponent
		default:
			return float32(-rng.ExpFloat64() * 3)
		}
	}
	for n := range 61 {
		for range 50 {
			vals := make([]float32, n)
			for i := range vals {
				vals[i] = draw()
			}
			want := joined(vals, AppendFloat32)
			for _, pre := range prefixes() {
				head := string(pre)
				got, bad := AppendFloat32s(pre, vals)
				if bad != -1 || string(got) != head+want {
					t.Fatalf("AppendFloat32s(%q, %v) = %q, %d; want %q, -1", head, vals, got, bad, head+want)
				}
			}
		}
	}
}

// TestAppendFloat32sRefusesNonFinite checks that a NaN or ±Inf anywhere in a list
// stops AppendFloat32s at its index with the destination as it was.
func TestAppendFloat32sRefusesNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for at := range 5 {
			vals := []float32{-0.5, -1.25, -3.75, 1e-9, -7}
			vals[at] = bad
			for _, pre := range prefixes() {
				head := string(pre)
				got, i := AppendFloat32s(pre, vals)
				if i != at || string(got) != head {
					t.Fatalf("AppendFloat32s(%q, %v) = %q, %d; want %q, %d", head, vals, got, i, head, at)
				}
			}
		}
	}
}
