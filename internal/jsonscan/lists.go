package jsonscan

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// The list writers write a list of numbers as the single-value writers would, element
// by element, with the work per element cut to what a value needs: room is reserved
// for many elements at once, each element is written as "," and its digits with a few
// 8-byte stores into that room, and the first comma becomes the opening bracket. The
// atropos encoder writes a group's distill rows (hundreds of thousands of ids and
// logprobs) and token lists with them.

// listRoom is the room an element of a list writer may store into: a comma, a sign,
// "0.", five zeros and two 8-byte stores of digits.
const listRoom = 32

// openList turns the comma at dst[start] into the list's opening bracket (or appends
// one for an empty list) and closes the list.
func openList(dst []byte, start int) []byte {
	if len(dst) > start {
		dst[start] = '['
	} else {
		dst = append(dst, '[')
	}
	return append(dst, ']')
}

// AppendInts appends vals as a JSON list of integers, as strconv writes each: the
// writing counterpart of [Scanner.Int32s] for ids, token lists and masks.
func AppendInts[T ~int | ~int32 | ~int64](dst []byte, vals []T) []byte {
	start := len(dst)
	for i, v := range vals {
		if cap(dst)-len(dst) < listRoom {
			dst = slices.Grow(dst, listRoom+9*(len(vals)-i))
		}
		u, neg := uint64(v), 0
		if v < 0 {
			u, neg = -u, 1
		}
		if u >= 1e8 { // nine digits and more
			dst = strconv.AppendInt(append(dst, ','), int64(v), 10)
			continue
		}
		x := spread8(u)
		lead := bits.TrailingZeros64(x|1<<56) / 8 // leading zeros, keeping one digit for 0
		l := len(dst)
		out := dst[l : l+10]
		out[0], out[1] = ',', '-'
		binary.LittleEndian.PutUint64(out[1+neg:], (x|0x3030303030303030)>>(8*lead))
		dst = dst[:l+9+neg-lead]
	}
	return openList(dst, start)
}

// AppendInt32s appends ids as a JSON list of numbers, the writing counterpart of
// [Scanner.Int32s].
func AppendInt32s(dst []byte, ids []int32) []byte { return AppendInts(dst, ids) }

// AppendFloat32s appends vals as a JSON list of numbers, each written as
// [AppendFloat32] writes it, and returns -1. At a NaN or ±Inf, which JSON cannot carry,
// it stops and returns the value's index with dst as it was.
//
// A value from 10^-6 up to 2^24 whose shortest decimal has a fraction (nearly every
// logprob) is converted here, as shortest32 converts it when the interval of decimals
// that read back as it is open on both sides and more than ½ wide around the value;
// every other value is written by AppendFloat32.
func AppendFloat32s(dst []byte, vals []float32) ([]byte, int) {
	start := len(dst)
	for i, f := range vals {
		if cap(dst)-len(dst) < listRoom {
			dst = slices.Grow(dst, listRoom+12*(len(vals)-i))
		}
		b := math.Float32bits(f)
		a := b &^ (1 << 31) // |f|
		frac := a & (1<<23 - 1)
		if a-min1e6Bits >= 151<<23-min1e6Bits || frac == 0 {
			// Below 10^-6 or from 2^24 up (not normal, not finite, or not certain
			// without shortest32's checks), or a power of 2 (whose lower neighbour is
			// nearer than its upper one).
			if a>>23 == 0xFF {
				return dst[:start], i
			}
			dst = AppendFloat32(append(dst, ','), f)
			continue
		}
		// shortest32's scaled interval, for an exponent q from -43 to 0: k is then
		// from -13 to 0, where pow10Inv's products need no check.
		q := int(a>>23) - 150
		k := q * 1262611 >> 22 // ⌊q·log₁₀ 2⌋
		p := &pow10Inv[k+45]
		s := uint(62 - q - int(p.e2))
		vh, vl := bits.Mul64(uint64(frac|1<<23)<<2, p.g)
		rl, carry := bits.Add64(vl, 2*p.g, 0)
		ll, borrow := bits.Sub64(vl, 2*p.g, 0)
		iv, fv := split(vh, vl, s)
		ir, fr := split(vh+carry, rl, s)
		il, fl := split(vh-borrow, ll, s)
		half := uint64(1) << ((s - 1) & 63)
		if fl == 0 || fr == 0 || fv == half {
			dst = AppendFloat32(append(dst, ','), f)
			continue
		}
		m := ir / 10 * 10 // the multiple of 10 the interval may hold
		var up, short uint64
		if fv > half {
			up = 1
		}
		if m > il {
			short = 1
		}
		d := (iv+up)&(short-1) | m/10&-short
		var lo, hi uint64
		var n, trailing int
		if d < 1e8 { // digits(d), without the call
			x := spread8(d)
			trailing = bits.LeadingZeros64(x) / 8
			lead := bits.TrailingZeros64(x) / 8 // x is not 0
			lo, n = (x|0x3030303030303030)>>(8*lead), 8-lead-trailing
		} else {
			lo, hi, n, trailing = digits(d)
		}
		point := n + k + int(short) + trailing // digits before the decimal point
		if point >= n {                        // no fraction: an integer
			dst = AppendFloat32(append(dst, ','), f)
			continue
		}
		l := len(dst)
		out := dst[l : l+listRoom]
		out[0], out[1] = ',', '-'
		j := 1 + int(b>>31) // past the sign
		if point > 0 {
			binary.LittleEndian.PutUint64(out[j:], lo)
			out[j+point] = '.'
			// lo's digits past the point, and hi's: 8·point is from 8 to 64.
			binary.LittleEndian.PutUint64(out[j+point+1:], lo>>((8*point-1)&63)>>1|hi<<((64-8*point)&63))
			dst = dst[:l+j+n+1]
			continue
		}
		binary.LittleEndian.PutUint64(out[j:], 0x3030303030302e30) // "0.000000"
		binary.LittleEndian.PutUint64(out[j+2-point:], lo)
		binary.LittleEndian.PutUint64(out[j+10-point:], hi)
		dst = dst[:l+j+2-point+n]
	}
	return openList(dst, start), -1
}

// spread8 returns v, below 10^8, as eight decimal digits with leading zeros, one per
// byte (0 to 9, not text), the first digit lowest: made at once, without a division
// per digit.
func spread8(v uint64) uint64 {
	h := v / 10000
	x := h | (v-h*10000)<<32                    // the high and the low four digits, one per 32-bit lane
	a := (x * 10486 >> 20) & 0x0000007F0000007F // each lane over 100 (exact below 43,699)
	x = a | (x-a*100)<<16                       // pairs of digits, one per 16-bit lane
	c := (x * 103 >> 10) & 0x000F000F000F000F   // each lane over 10 (exact below 179)
	return c | (x-c*10)<<8
}
