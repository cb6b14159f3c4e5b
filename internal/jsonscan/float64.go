package jsonscan

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// AppendFloat64 appends f as encoding/json writes a float64: the fewest digits that
// read back as f (of those, the nearest to f), in plain notation from 1e-6 up to 1e21
// and in exponent notation outside it, byte for byte as strconv with precision -1 and
// bit size 64. f must be finite for JSON; NaN and ±Inf are written as strconv writes
// them in the 'e' format.
//
// A value from 10^-6 up to 2^53 that is not a power of 2 is converted here with exact
// integer arithmetic, as shortest32 converts a float32: its exponent q is then from
// -72 to 0, so the interval scaled by 10^-k (k = ⌊q·log₁₀ 2⌋, from -22 to 0) is the
// product of x·5^-k, below 2^107, and a power of 2. Every other value goes through
// strconv.
func AppendFloat64(dst []byte, f float64) []byte {
	b := math.Float64bits(f)
	a := b &^ (1 << 63) // |f|
	frac := a & (1<<52 - 1)
	if a-min1e6Bits64 >= 1076<<52-min1e6Bits64 || frac == 0 {
		return appendFloat64Strconv(dst, f)
	}
	q := int(a>>52) - 1075
	k := q * 1262611 >> 22 // ⌊q·log₁₀ 2⌋
	p5 := pow5[-k&31]
	s := uint(2 - q + k) // from 2 to 52
	// The float and the bounds are xv, xv + 2 and xv - 2 in units of 2^(q-2); scaled
	// by 10^-k, each is x·5^-k·2^-s, exactly.
	xv := (frac | 1<<52) << 2
	vh, vl := bits.Mul64(xv, p5)
	rh, rl := bits.Mul64(xv+2, p5)
	lh, ll := bits.Mul64(xv-2, p5)
	iv, fv := split(vh, vl, s)
	ir, fr := split(rh, rl, s)
	il, fl := split(lh, ll, s)
	half := uint64(1) << ((s - 1) & 63)
	m := ir / 10 * 10 // the multiple of 10 the interval may hold
	var d uint64
	var e int
	switch {
	case fl == 0 || fr == 0 || fv == half:
		d, e = choose(iv, fv, il, fl, ir, fr, half, m, k, frac&1 == 0, false)
	case m > il: // open both ways and more than ½ wide on each side, as in shortest32
		d, e = m/10, k+1
	case fv > half:
		d, e = iv+1, k
	default:
		d, e = iv, k
	}
	// d is below 10c < 10^17: its digits, with leading zeros, are text[:17].
	var text [24]byte
	top, low := d/1e8, d%1e8
	text[0] = '0' + byte(top/1e8)
	binary.LittleEndian.PutUint64(text[1:], spread8(top%1e8)|0x3030303030303030)
	binary.LittleEndian.PutUint64(text[9:], spread8(low)|0x3030303030303030)
	first, last := 0, 17
	for text[first] == '0' {
		first++
	}
	for text[last-1] == '0' {
		last--
	}
	e += 17 - last
	digits := text[first:last]
	point := len(digits) + e // digits before the decimal point
	if e >= 0 {
		return appendFloat64Strconv(dst, f)
	}
	if a != b {
		dst = append(dst, '-')
	}
	if point > 0 {
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		return append(dst, digits[point:]...)
	}
	dst = append(dst, "0.00000"[:2-point]...)
	return append(dst, digits...)
}

// min1e6Bits64 is the bits of the float64 nearest 1e-6, where encoding/json's plain
// notation begins.
const min1e6Bits64 = 0x3eb0c6f7a0b5ed8d

// pow5 holds 5^i for i from 0 to 22 (and 0 past it, never used).
var pow5 = func() (p [32]uint64) {
	p[0] = 1
	for i := 1; i <= 22; i++ {
		p[i] = p[i-1] * 5
	}
	return p
}()

// appendFloat64Strconv is AppendFloat64 by strconv, for the values it leaves.
func appendFloat64Strconv(dst []byte, f float64) []byte {
	a := math.Abs(f)
	return appendStrconv(dst, f, 64, a != 0 && (a < 1e-6 || a >= 1e21))
}
