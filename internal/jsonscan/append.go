package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
)

// AppendInt32 appends id in decimal, as strconv.AppendInt does. Ids below 10⁸ (every
// vocabulary's) are turned into eight digit bytes at once, without a division per
// digit, and written with one store.
func AppendInt32(dst []byte, id int32) []byte {
	if uint32(id) >= 1e8 {
		return strconv.AppendInt(dst, int64(id), 10)
	}
	x := spread8(uint64(id))
	lead := bits.TrailingZeros64(x|1<<56) / 8 // leading zeros, keeping one digit for 0
	l := len(dst)
	dst = slices.Grow(dst, 8)[:l+8]
	binary.LittleEndian.PutUint64(dst[l:], (x|0x3030303030303030)>>(8*lead))
	return dst[:l+8-lead]
}
