package jsonscan_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// ids16k is a list of 16,000 ids of a 151k vocabulary, the size of a long prompt.
func ids16k() []int32 {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, 16000)
	for i := range ids {
		ids[i] = int32(rng.IntN(151000))
	}
	return ids
}

// BenchmarkInt32s reads a 16,000-id list, as the vLLM client reads a prompt's echo and
// the simulator a prompt.
func BenchmarkInt32s(b *testing.B) {
	data := []byte{'['}
	for i, id := range ids16k() {
		if i > 0 {
			data = append(data, ',')
		}
		data = strconv.AppendInt(data, int64(id), 10)
	}
	data = append(data, ']')
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s := jsonscan.Scanner{Data: data}
		if ids, err := s.Int32s(); err != nil || len(ids) != 16000 {
			b.Fatal(len(ids), err)
		}
	}
}

// BenchmarkAppendInt32s writes a 16,000-id list, as the vLLM client writes a prompt.
func BenchmarkAppendInt32s(b *testing.B) {
	ids := ids16k()
	buf := jsonscan.AppendInt32s(nil, ids)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = jsonscan.AppendInt32s(buf[:0], ids)
	}
}
