package vllmtest

import (
	"bufio"
	"encoding/json"
	"math"
	"math/bits"
	"strconv"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// jw writes JSON by hand, for responses that hold ordered objects (prompt_logprobs,
// top_logprobs) or are too large to build in memory.
type jw struct {
	w   *bufio.Writer
	buf []byte
}

func (j *jw) raw(s string) { _, _ = j.w.WriteString(s) }

func (j *jw) bytes(b []byte) { _, _ = j.w.Write(b) }

func (j *jw) str(s string) {
	b, _ := json.Marshal(s)
	_, _ = j.w.Write(b)
}

func (j *jw) int(n int64) {
	j.buf = strconv.AppendInt(j.buf[:0], n, 10)
	_, _ = j.w.Write(j.buf)
}

// logprob writes a logprob as vLLM does: a float32 value, −∞ clamped to -9999.
func (j *jw) logprob(f float64) {
	if math.IsInf(f, -1) || f < -9999 || math.IsNaN(f) {
		f = -9999
	}
	j.buf = strconv.AppendFloat(j.buf[:0], float64(float32(f)), 'g', -1, 64)
	_, _ = j.w.Write(j.buf)
}

// ids writes a list of ids, formatted a few thousand at a time into one buffer.
func (j *jw) ids(ids []int32) {
	if cap(j.buf) < 40<<10 {
		j.buf = make([]byte, 0, 40<<10) // a block and the longest id, without regrowing
	}
	b := append(j.buf[:0], '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendInt32(b, id)
		if len(b) >= 32<<10 {
			j.bytes(b)
			b = b[:0]
		}
	}
	j.buf = append(b, ']')
	j.bytes(j.buf)
}

// echoIDs writes ids, which sent, a JSON list, parses to: sent itself when it is
// written as ids writes them, which saves formatting them again. A list that parses
// to ids is never shorter than ids' compact form (spaces, a "-0" or a null element
// for 0 only add bytes), so one of the same length is that form.
func (j *jw) echoIDs(ids []int32, sent []byte) {
	if len(sent) != compactLen(ids) {
		j.ids(ids)
		return
	}
	j.bytes(sent)
}

// compactLen is the length of the list ids writes for ids, which are not negative.
func compactLen(ids []int32) int {
	n := len(ids) + 1 // brackets and commas
	if len(ids) == 0 {
		n = 2
	}
	for _, id := range ids {
		n += uintLen(uint32(id))
	}
	return n
}

// tens[d] is 10^d, except that tens[0] is 0 (see uintLen).
var tens = [...]uint32{0, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// uintLen is the number of decimal digits of v, without a division: 1233/4096
// approximates log10(2), so d is the digits of v less one, or one short of that,
// which the comparison with 10^d settles.
func uintLen(v uint32) int {
	d := bits.Len32(v) * 1233 >> 12
	if v >= tens[d] {
		d++
	}
	return d
}

// idsOrNull writes ids when ok, null otherwise.
func (j *jw) idsOrNull(ids []int32, ok bool) {
	if !ok {
		j.raw("null")
		return
	}
	j.ids(ids)
}

// value writes v with encoding/json.
func (j *jw) value(v any) {
	b, _ := json.Marshal(v)
	_, _ = j.w.Write(b)
}

// clampLogprob is the value a client decodes for f.
func clampLogprob(f float64) float32 {
	if math.IsInf(f, -1) || f < -9999 || math.IsNaN(f) {
		return -9999
	}
	return float32(f)
}
