package jsonscan

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// AppendFloat32 appends f as encoding/json writes a float32: the fewest digits that
// read back as f (of those, the nearest to f), in plain notation from 1e-6 up to 1e21
// and in exponent notation (1e-7, 1e+21) outside it. The output is strconv's
// (AppendFloat with precision -1 and bit size 32) byte for byte; f must be finite for
// JSON, and NaN and ±Inf are written as strconv writes them in the 'e' format.
//
// Normal values are converted here with one 64×64-bit product; those whose product
// lies too close to an integer or a half for its rounding to be certain (some above
// 2^27), and the values below the normal range, go through strconv.
func AppendFloat32(dst []byte, f float32) []byte {
	b := math.Float32bits(f)
	a := b &^ (1 << 31) // |f|
	exp := a >> 23
	if exp == 0 || exp == 0xFF { // zero, below the normal range, ±Inf or NaN
		if a == 0 {
			if b != 0 {
				return append(dst, "-0"...)
			}
			return append(dst, '0')
		}
		return appendFloat32Strconv(dst, f)
	}
	d, e, ok := shortest32(a&(1<<23-1), exp)
	if !ok {
		return appendFloat32Strconv(dst, f)
	}
	lo, hi, n, trailing := digits(d)
	e += trailing
	point := n + e // digits before the decimal point
	if a < min1e6Bits || a >= min1e21Bits || e >= 0 {
		if a != b {
			dst = append(dst, '-')
		}
		var buf [16]byte
		binary.LittleEndian.PutUint64(buf[:], lo)
		binary.LittleEndian.PutUint64(buf[8:], hi)
		if e >= 0 && a < min1e21Bits {
			dst = append(dst, buf[:n]...)
			for range e {
				dst = append(dst, '0')
			}
			return dst
		}
		return appendExp(dst, buf[:n], point-1)
	}
	// A plain number with a fraction, written into room for 32 bytes by 8-byte stores
	// and cut to its length: the sign, digits, the point and digits, or "0." and up to
	// five zeros before the digits (1e-6 ≤ |f|).
	l := len(dst)
	if cap(dst)-l < 32 {
		dst = slices.Grow(dst, 32)
	}
	out := dst[l : l+32]
	i := 0
	if a != b {
		out[0] = '-'
		i = 1
	}
	if point > 0 { // and below n, so at most 8
		binary.LittleEndian.PutUint64(out[i:], lo)
		out[i+point] = '.'
		binary.LittleEndian.PutUint64(out[i+point+1:], lo>>(8*point)|hi<<(64-8*point))
		return dst[:l+i+n+1]
	}
	binary.LittleEndian.PutUint64(out[i:], 0x3030303030302e30) // "0.000000"
	binary.LittleEndian.PutUint64(out[i+2-point:], lo)
	binary.LittleEndian.PutUint64(out[i+10-point:], hi)
	return dst[:l+i+2-point+n]
}

// The bits of the float32 nearest 1e-6 and 1e21, where encoding/json's plain notation
// begins and ends; bits order non-negative float32s as their values.
const (
	min1e6Bits  = 0x358637bd
	min1e21Bits = 0x6258d727
)

// digits returns d, from 1 to below 2·10^8, in decimal without its trailing zeros:
// the text's first eight bytes in lo and the rest in hi, first byte lowest (bytes past
// the digits are to be ignored), the number of digits, and how many zeros it left
// off.
func digits(d uint64) (lo, hi uint64, n, trailing int) {
	top := d >= 1e8
	low8 := d
	if top {
		low8 -= 1e8
	}
	x := spread8(low8)
	trailing = bits.LeadingZeros64(x) / 8 // 8 when x is 0
	x |= 0x3030303030303030
	if top {
		return '1' | x<<8, x >> 56, 9 - trailing, trailing
	}
	lead := bits.TrailingZeros64(x&^0x3030303030303030) / 8 // x has a digit other than 0
	return x >> (8 * lead), 0, 8 - lead - trailing, trailing
}

// appendExp appends d.ddde±x, the exponent without a leading zero when negative and
// with two digits at least when positive, as encoding/json writes it.
func appendExp(dst, d []byte, x int) []byte {
	dst = append(dst, d[0])
	if len(d) > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	if x < 0 {
		dst = append(dst, "e-"...)
		return strconv.AppendInt(dst, int64(-x), 10)
	}
	dst = append(dst, "e+"...)
	if x < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(x), 10)
}

// appendFloat32Strconv is AppendFloat32 by strconv, for the values shortest32 leaves.
func appendFloat32Strconv(dst []byte, f float32) []byte {
	a := float32(math.Abs(float64(f)))
	return appendStrconv(dst, float64(f), 32, a != 0 && (a < 1e-6 || a >= 1e21))
}

// appendStrconv writes f with strconv at the given bit size, in exponent notation when
// exp is set (its exponent without a leading zero, e-7 and not e-07, as encoding/json
// writes it) and in plain notation otherwise.
func appendStrconv(dst []byte, f float64, bitSize int, exp bool) []byte {
	if !exp {
		return strconv.AppendFloat(dst, f, 'f', -1, bitSize)
	}
	dst = strconv.AppendFloat(dst, f, 'e', -1, bitSize)
	if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}

// shortest32 returns the shortest decimal d·10^e that reads back as the normal float32
// of the given fraction and biased exponent (of those, the nearest), with ok false when
// it cannot be certain of it; d may end in zeros, and is below 2·10^8.
//
// The float is c·2^q; the decimals that read back as it are those strictly between
// the halfway points to its neighbours, c·2^q ± 2^(q-1) (the lower one 2^(q-2) below
// when c is a power of two whose lower neighbour is nearer), or on them when c is
// even (reading rounds ties to even). k is chosen so that this interval, scaled by
// 10^-k, is more than 1 and less than 10 wide: it then holds at least one integer and
// at most one multiple of 10. A multiple of 10 in it has fewer digits than any other
// decimal in it, and is the answer; otherwise the answer is the integer in it nearest
// c·2^q (of two as near, the even one, or the upper one when c is a power of two, as
// strconv chooses).
func shortest32(frac, exp uint32) (d uint64, e int, ok bool) {
	c := uint64(frac) | 1<<23
	q := int(exp) - 150
	irregular := frac == 0 && exp > 1
	k := q * 1262611 >> 22 // ⌊q·log₁₀ 2⌋
	if irregular {
		k = (q*1262611 - 524031) >> 22 // ⌊log₁₀(¾·2^q)⌋
	}
	p := &pow10Inv[k+45]
	s := uint(62 - q - int(p.e2))
	// The float and the bounds are xv, xv + 2 and xv - 2 (xv - 1 when irregular) in
	// units of 2^(q-2); scaled, each is x·g·2^-s, made here from the one product.
	xv := c << 2
	vh, vl := bits.Mul64(xv, p.g)
	rl, carry := bits.Add64(vl, 2*p.g, 0)
	below := 2 * p.g
	if irregular {
		below = p.g
	}
	ll, borrow := bits.Sub64(vl, below, 0)
	iv, fv := split(vh, vl, s)
	ir, fr := split(vh+carry, rl, s)
	il, fl := split(vh-borrow, ll, s)
	half := uint64(1) << ((s - 1) & 63)
	if k > 0 || k < -26 { // p.g is above 10^-k·2^(60-e2), by less than 1
		// Each product is then above the exact one by less than its x units of 2^-s:
		// its integer part is the exact one's, and its fraction on the same side of a
		// half, unless the fraction is within x above 0 or the half.
		if x := xv + 2; fl < x || fr < x || fv < x || fv >= half && fv-half < x {
			return 0, 0, false
		}
	}
	m := ir / 10 * 10 // the multiple of 10 the interval may hold
	if fl != 0 && fr != 0 && fv != half && !irregular {
		// No bound is a decimal of this length, and c·2^q is not halfway between two:
		// the interval is open both ways and more than ½ wide on each side of c·2^q.
		// Chosen without branches: either way is as likely.
		var up, short uint64
		if fv > half {
			up = 1
		}
		if m > il {
			short = 1
		}
		return (iv+up)&(short-1) | m/10&-short, k + int(short), true
	}
	d, e = choose(iv, fv, il, fl, ir, fr, half, m, k, c&1 == 0, irregular)
	return d, e, true
}

// choose returns the shortest decimal, as d·10^e, in an interval of decimals scaled by
// 10^-k to a width from 1 to 10: the value is iv + fv, the bounds il + fl and ir + fr
// (fractions in units where half is ½), m is the multiple of 10 the interval may hold,
// and the bounds are in it when inclusive. It is the multiple of 10 when the interval
// holds it, and otherwise the integer in it nearest the value (of two as near, the
// even one, or the upper one when irregular, as strconv chooses).
func choose(iv, fv, il, fl, ir, fr, half, m uint64, k int, inclusive, irregular bool) (d uint64, e int) {
	lOnInt, rOnInt := fl == 0, fr == 0
	if (m > il || m == il && lOnInt && inclusive) && (m < ir || !rOnInt || inclusive) {
		return m / 10, k + 1
	}
	d = iv
	up := fv > half || fv == half && (d&1 == 1 || irregular)
	inLow := d > il || lOnInt && inclusive // d == il otherwise
	inHigh := d+1 < ir || d+1 == ir && (!rOnInt || inclusive)
	if up && inHigh || !inLow {
		d++
	}
	return d, k
}

// split returns the integer part and the fraction, in units of 2^-s, of (hi·2^64 +
// lo)·2^-s for 0 < s < 64 (the masks tell the compiler so).
func split(hi, lo uint64, s uint) (uint64, uint64) {
	return hi<<((64-s)&63) | lo>>(s&63), lo & (1<<(s&63) - 1)
}

// pow10Inv holds 10^-k for k from -45 to 31 (pow10Inv[k+45]) as g·2^(e2-60): the
// powers of 10 that scale a normal float32's interval to a width between 1 and 10. It
// is never written.
var pow10Inv = [77]struct {
	g  uint64 // 10^-k·2^(60-e2), rounded up, in [2^60, 2^61)
	e2 int16  // ⌊log₂ 10^-k⌋
}{
	{0x166bb7f0435c9e72, 149},  // k = -45
	{0x11efc659cf7d4b8e, 146},  // k = -44
	{0x1cb2d6f618c878e4, 142},  // k = -43
	{0x16f578c4e0a060b6, 139},  // k = -42
	{0x125dfa371a19e6f8, 136},  // k = -41
	{0x1d6329f1c35ca4c0, 132},  // k = -40
	{0x178287f49c4a1d67, 129},  // k = -39
	{0x12ced32a16a1b11f, 126},  // k = -38
	{0x1e17b84357691b65, 122},  // k = -37
	{0x1812f9cf7920e2b7, 119},  // k = -36
	{0x13426172c74d822c, 116},  // k = -35
	{0x1ed09bead87c0379, 112},  // k = -34
	{0x18a6e32246c99c61, 109},  // k = -33
	{0x13b8b5b5056e16b4, 106},  // k = -32
	{0x1f8def8808b02453, 102},  // k = -31
	{0x193e5939a08ce9dc, 99},   // k = -30
	{0x1431e0fae6d7217d, 96},   // k = -29
	{0x1027e72f1f128131, 93},   // k = -28
	{0x19d971e4fe8401e8, 89},   // k = -27
	{0x14adf4b7320334b9, 86},   // k = -26
	{0x108b2a2c28029094, 83},   // k = -25
	{0x1a784379d99db420, 79},   // k = -24
	{0x152d02c7e14af680, 76},   // k = -23
	{0x10f0cf064dd59200, 73},   // k = -22
	{0x1b1ae4d6e2ef5000, 69},   // k = -21
	{0x15af1d78b58c4000, 66},   // k = -20
	{0x1158e460913d0000, 63},   // k = -19
	{0x1bc16d674ec80000, 59},   // k = -18
	{0x16345785d8a00000, 56},   // k = -17
	{0x11c37937e0800000, 53},   // k = -16
	{0x1c6bf52634000000, 49},   // k = -15
	{0x16bcc41e90000000, 46},   // k = -14
	{0x12309ce540000000, 43},   // k = -13
	{0x1d1a94a200000000, 39},   // k = -12
	{0x174876e800000000, 36},   // k = -11
	{0x12a05f2000000000, 33},   // k = -10
	{0x1dcd650000000000, 29},   // k = -9
	{0x17d7840000000000, 26},   // k = -8
	{0x1312d00000000000, 23},   // k = -7
	{0x1e84800000000000, 19},   // k = -6
	{0x186a000000000000, 16},   // k = -5
	{0x1388000000000000, 13},   // k = -4
	{0x1f40000000000000, 9},    // k = -3
	{0x1900000000000000, 6},    // k = -2
	{0x1400000000000000, 3},    // k = -1
	{0x1000000000000000, 0},    // k = 0
	{0x199999999999999a, -4},   // k = 1
	{0x147ae147ae147ae2, -7},   // k = 2
	{0x10624dd2f1a9fbe8, -10},  // k = 3
	{0x1a36e2eb1c432ca6, -14},  // k = 4
	{0x14f8b588e368f085, -17},  // k = 5
	{0x10c6f7a0b5ed8d37, -20},  // k = 6
	{0x1ad7f29abcaf4858, -24},  // k = 7
	{0x15798ee2308c39e0, -27},  // k = 8
	{0x112e0be826d694b3, -30},  // k = 9
	{0x1b7cdfd9d7bdbab8, -34},  // k = 10
	{0x15fd7fe179649560, -37},  // k = 11
	{0x119799812dea111a, -40},  // k = 12
	{0x1c25c268497681c3, -44},  // k = 13
	{0x16849b86a12b9b02, -47},  // k = 14
	{0x1203af9ee756159c, -50},  // k = 15
	{0x1cd2b297d889bc2c, -54},  // k = 16
	{0x170ef54646d4968a, -57},  // k = 17
	{0x12725dd1d243aba1, -60},  // k = 18
	{0x1d83c94fb6d2ac35, -64},  // k = 19
	{0x179ca10c9242235e, -67},  // k = 20
	{0x12e3b40a0e9b4f7e, -70},  // k = 21
	{0x1e392010175ee597, -74},  // k = 22
	{0x182db34012b25145, -77},  // k = 23
	{0x1357c299a88ea76b, -80},  // k = 24
	{0x1ef2d0f5da7dd8ab, -84},  // k = 25
	{0x18c240c4aecb13bc, -87},  // k = 26
	{0x13ce9a36f23c0fca, -90},  // k = 27
	{0x1fb0f6be50601942, -94},  // k = 28
	{0x195a5efea6b34768, -97},  // k = 29
	{0x14484bfeebc29f87, -100}, // k = 30
	{0x1039d66589687f9f, -103}, // k = 31
}
