package vllmtest

import (
	"bufio"
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// written returns what write writes through a jw.
func written(write func(j *jw)) string {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	write(&jw{w: w})
	_ = w.Flush()
	return b.String()
}

// echoLikeIDs checks that echoing sent, the text of a prompt, writes what writing its
// ids writes.
func echoLikeIDs(t *testing.T, sent string) {
	t.Helper()
	sc := jsonscan.Scanner{Data: []byte(sent)}
	ids, err := sc.Int32s()
	if err != nil || ids == nil || sc.End() != nil {
		return // not a prompt the simulator echoes
	}
	for _, id := range ids {
		if id < 0 {
			return // refused before any answer is written
		}
	}
	want := written(func(j *jw) { j.ids(ids) })
	got := written(func(j *jw) { j.echoIDs(ids, []byte(sent)) })
	require.Equal(t, want, got, sent)
}

func TestEchoIDsLikeIDs(t *testing.T) {
	for _, sent := range []string{
		`[1,2,3]`, `[0]`, `[]`, `[151643,9,10,99,100,999999,2147483647]`,
		`[ 1,2]`, `[1 ,2]`, `[1,2 ]`, `[-0,12]`, `[null,12]`, `[0,null]`, `[10,0]`, `[1,0]`,
	} {
		echoLikeIDs(t, sent)
	}
}

func FuzzEchoIDsLikeIDs(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[-0]`, `[ null ]`, `[100000,7]`} {
		f.Add(s)
	}
	f.Fuzz(echoLikeIDs)
}

func TestUintLen(t *testing.T) {
	for _, v := range []uint32{0, 1, 9, 10, 11, 99, 100, 151643, 999999, 1e6, 1<<31 - 1, 1 << 31, 1e9 - 1, 1e9, 1<<32 - 1} {
		require.Equal(t, len(strconv.FormatUint(uint64(v), 10)), uintLen(v), v)
	}
	for v := uint32(1); v < 1e9; v *= 10 {
		for _, w := range []uint32{v - 1, v, v + 1, 2*v - 1, 2 * v} {
			require.Equal(t, len(strconv.FormatUint(uint64(w), 10)), uintLen(w), w)
		}
	}
	require.Equal(t, len(`[0,12,345]`), compactLen([]int32{0, 12, 345}))
	require.Equal(t, len(`[]`), compactLen(nil))
}
