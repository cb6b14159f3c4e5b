package nemogym

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
)

// appendFloat32 appends f as strconv.AppendFloat(dst, float64(f), 'g', -1, 32) does,
// byte for byte: the fewest digits that read back as f, in %e form when the decimal
// exponent is below -4 or at least 6 (as "1.5e-05"), in %f form otherwise.
//
// The answers and request bodies are mostly logprobs, and strconv spends more time
// per float32 in its general machinery than in finding the digits; this finds them
// with Schubfach (R. Giulietti, "The Schubfach way to render doubles", 2020; the
// float32 case of its Java implementation, FloatToDecimal) and writes them directly.
// NaN and ±Inf go to strconv.
func appendFloat32(dst []byte, f float32) []byte {
	b := math.Float32bits(f)
	if b&0x7F800000 == 0x7F800000 {
		return strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
	}
	d, e := shortestFloat32(b &^ (1 << 31))
	if b&(1<<31) != 0 {
		dst = append(dst, '-')
	}
	if d == 0 {
		return append(dst, '0')
	}
	// d has no trailing zeros; the value is 0.d × 10^dp.
	var digits [10]byte // d < 10^9
	n := len(digits)
	v := d
	for v >= 100 {
		q := v / 100
		r := 2 * (v - 100*q)
		n -= 2
		digits[n], digits[n+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		n -= 2
		digits[n], digits[n+1] = digitPairs[2*v], digitPairs[2*v+1]
	} else {
		n--
		digits[n] = byte('0' + v)
	}
	ds := digits[n:]
	dp := len(ds) + e
	if x := dp - 1; x < -4 || x >= 6 {
		dst = append(dst, ds[0])
		if len(ds) > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if x < 0 {
			dst = append(dst, '-')
			x = -x
		} else {
			dst = append(dst, '+')
		}
		if x < 10 {
			return append(dst, '0', byte('0'+x))
		}
		return append(dst, byte('0'+x/10), byte('0'+x%10)) // |x| ≤ 45 for a float32
	}
	switch {
	case dp <= 0:
		dst = append(dst, '0', '.')
		for range -dp {
			dst = append(dst, '0')
		}
		return append(dst, ds...)
	case dp >= len(ds):
		dst = append(dst, ds...)
		for range dp - len(ds) {
			dst = append(dst, '0')
		}
		return dst
	}
	dst = append(dst, ds[:dp]...)
	dst = append(dst, '.')
	return append(dst, ds[dp:]...)
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// shortestFloat32 returns the shortest decimal d × 10^e that reads back as the
// positive (or zero) finite float32 with bits b, the closest to it among those,
// with trailing zeros removed from d. The powers of two that are not small integers
// come from float32Pow2: below them the float32s are closer together than above,
// and where two decimals are equally close strconv takes the larger one (Dragonbox's
// rule for that case) where Schubfach takes the even one.
func shortestFloat32(b uint32) (d uint64, e int) {
	const (
		p    = 24
		qMin = -149
		cMin = 1 << 23
	)
	t := b & (cMin - 1)
	bq := int(b >> 23)
	switch {
	case bq != 0:
		mq := -qMin + 1 - bq
		c := uint64(cMin | t)
		switch {
		case 0 < mq && mq < p && (c>>mq)<<mq == c:
			d, e = c>>mq, 0 // an integer
		case t == 0:
			p := float32Pow2[bq]
			return p.d, p.e
		default:
			d, e = schubfach32(-mq, c, 0)
		}
	case t == 0:
		return 0, 0
	default: // subnormal
		d, e = schubfach32(qMin, uint64(t), 0)
	}
	for d%10 == 0 {
		d /= 10
		e++
	}
	return d, e
}

// schubfach32 is FloatToDecimal.toDecimal(q, c, dk) for floats: the decimal for
// c × 2^q.
func schubfach32(q int, c uint64, dk int) (uint64, int) {
	const qMin, cMin = -149, 1 << 23
	out := c & 1
	cb := c << 2
	cbr := cb + 2
	var cbl uint64
	var k int
	if c != cMin || q == qMin {
		cbl = cb - 2
		k = flog10pow2(q)
	} else {
		cbl = cb - 1
		k = flog10threeQuartersPow2(q)
	}
	h := uint(q + flog2pow10(-k) + 33)
	g := float32G1[k-float32KMin] + 1
	vb := rop32(g, cb<<h)
	vbl := rop32(g, cbl<<h)
	vbr := rop32(g, cbr<<h)
	s := vb >> 2
	if s >= 10 {
		sp10 := 10 * (s / 10)
		tp10 := sp10 + 10
		upin := vbl+out <= sp10<<2
		wpin := tp10<<2+out <= vbr
		if upin != wpin {
			if upin {
				return sp10, k + dk
			}
			return tp10, k + dk
		}
	}
	tt := s + 1
	uin := vbl+out <= s<<2
	win := tt<<2+out <= vbr
	if uin != win {
		if uin {
			return s, k + dk
		}
		return tt, k + dk
	}
	cmp := int64(vb) - int64((s+tt)<<1)
	if cmp < 0 || cmp == 0 && s&1 == 0 {
		return s, k + dk
	}
	return tt, k + dk
}

// float32Pow2[bq] is the decimal strconv writes for the float32 2^(bq-127), for the
// biased exponents bq of normal float32s.
var float32Pow2 = func() (t [255]struct {
	d uint64
	e int
}) {
	for bq := 1; bq < 255; bq++ {
		// "d.ddde±xx": the digits and the exponent of the first one
		s := strconv.FormatFloat(float64(math.Float32frombits(uint32(bq)<<23)), 'e', -1, 32)
		mant, exp, _ := strings.Cut(s, "e")
		digits := strings.Replace(mant, ".", "", 1)
		d, err1 := strconv.ParseUint(digits, 10, 64)
		x, err2 := strconv.Atoi(exp)
		if err1 != nil || err2 != nil {
			panic("nemogym: float32Pow2: " + s)
		}
		t[bq].d, t[bq].e = d, x-(len(digits)-1)
	}
	return t
}()

// rop32 is FloatToDecimal.rop: the high bits of g × cp, rounded to odd.
func rop32(g, cp uint64) uint64 {
	x1, _ := bits.Mul64(g, cp)
	return x1>>31 | ((x1&0xFFFFFFFF)+0xFFFFFFFF)>>32
}

// flog10pow2 is ⌊q log10 2⌋, flog10threeQuartersPow2 ⌊log10(3/4 × 2^q)⌋ and
// flog2pow10 ⌊e log2 10⌋, exact over the ranges used here (MathUtils).
func flog10pow2(q int) int { return int(int64(q) * 661_971_961_083 >> 41) }
func flog10threeQuartersPow2(q int) int {
	return int((int64(q)*661_971_961_083 - 274_743_187_321) >> 41)
}
func flog2pow10(e int) int { return int(int64(e) * 913_124_641_741 >> 38) }

// float32KMin is the least k schubfach32 uses, and float32G1[k-float32KMin] is
// MathUtils.g1(k): with 10^-k = β 2^r and 2^125 ≤ β < 2^126, the high 63 bits of
// ⌊β⌋ + 1. They are computed once, exactly.
const float32KMin = -46

var float32G1 = func() (g1 [80]uint64) {
	for i := range g1 {
		k := i + float32KMin
		beta := new(big.Int)
		shift := 125 - flog2pow10(-k) // β = 10^-k × 2^shift
		if k <= 0 {
			beta.Exp(big.NewInt(10), big.NewInt(int64(-k)), nil)
			if shift >= 0 {
				beta.Lsh(beta, uint(shift))
			} else {
				beta.Rsh(beta, uint(-shift))
			}
		} else {
			beta.Lsh(big.NewInt(1), uint(shift))
			beta.Quo(beta, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
		}
		beta.Add(beta, big.NewInt(1))
		g1[i] = new(big.Int).Rsh(beta, 63).Uint64()
	}
	return g1
}()
