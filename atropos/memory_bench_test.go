package atropos_test

import (
	"runtime"
	"testing"

	"github.com/agentic-opd/agenticopd/atropos"
)

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGroupMemory builds the teacher rows of a group of 8 sequences × 16384
// tokens with K = 50 entries on a quarter of the positions, as the env fills them (room
// for every entry made first with Grow, then one SetRow per scored position), and measures the live heap they hold: the flat ids and
// logprobs (8 bytes per entry) and the per-position index. bytes-per-distill-entry is
// that heap over the number of (id, logprob) entries.
func BenchmarkGroupMemory(b *testing.B) {
	const n, L, K = 8, 16384, 50
	ids := make([]int32, K)
	lps := make([]float32, K)
	var perEntry float64
	var entries int
	for b.Loop() {
		before := liveHeap()
		rows := make([]*atropos.DistillRows, n)
		entries = 0
		for s := range rows {
			rows[s] = atropos.NewDistillRows(L)
			rows[s].Grow(L / 4 * K)
			for pos := 3; pos < L; pos += 4 {
				for k := range K {
					ids[k], lps[k] = int32((pos*31+k*977+s)%151643), -float32(k)*0.173
				}
				if err := rows[s].SetRow(pos, ids, lps); err != nil {
					b.Fatal(err)
				}
				entries += K
			}
		}
		after := liveHeap()
		runtime.KeepAlive(rows)
		perEntry = float64(after-before) / float64(entries)
	}
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(perEntry, "bytes-per-distill-entry")
}

func TestGrowSavesReallocation(t *testing.T) {
	r := atropos.NewDistillRows(100)
	r.Grow(2 * 100 * 3) // AllocsPerRun calls the function twice
	ids, lps := []int32{1, 2, 3}, []float32{-1, -2, -3}
	allocs := testing.AllocsPerRun(1, func() {
		for pos := range 100 {
			if err := r.SetRow(pos, ids, lps); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("SetRow allocated %v times after Grow", allocs)
	}
	if got := r.Entries(); got != 300 {
		t.Errorf("Entries = %d, want 300", got)
	}
}
