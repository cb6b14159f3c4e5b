package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
)

// AppendInt32s appends ids as a JSON list of numbers, the writing counterpart of
// [Scanner.Int32s].
func AppendInt32s(dst []byte, ids []int32) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendInt32(dst, id)
	}
	return append(dst, ']')
}

// AppendInt32 appends id in decimal, as strconv.AppendInt does. Ids below 10⁸ (every
// vocabulary's) are turned into eight digit bytes at once, without a division per
// digit, and written with one store.
func AppendInt32(dst []byte, id int32) []byte {
	if uint32(id) >= 1e8 {
		return strconv.AppendInt(dst, int64(id), 10)
	}
	v := uint64(id)
	hi := v / 10000
	x := hi | (v-hi*10000)<<32                  // the high and the low four digits, one per 32-bit lane
	a := (x * 10486 >> 20) & 0x0000007F0000007F // each lane over 100 (exact below 43,699)
	x = a | (x-a*100)<<16                       // pairs of digits, one per 16-bit lane
	c := (x * 103 >> 10) & 0x000F000F000F000F   // each lane over 10 (exact below 179)
	x = c | (x-c*10)<<8                         // one digit per byte, the first digit lowest
	lead := 7                                   // leading zeros, keeping one digit for 0
	if x != 0 {
		lead = bits.TrailingZeros64(x) / 8
	}
	l := len(dst)
	dst = slices.Grow(dst, 8)[:l+8]
	binary.LittleEndian.PutUint64(dst[l:], (x|0x3030303030303030)>>(8*lead))
	return dst[:l+8-lead]
}
