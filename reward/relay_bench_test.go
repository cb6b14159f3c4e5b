package reward_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// worstReply is the number of Nones in a list whose reply,
// {"id":3,"ok":["l",[null,…]]}, is as long as MaxMessage allows: the most values one
// message can hold, each costing the relay the most for its bytes.
const worstReply = (reward.MaxMessage - len(`{"id":3,"ok":["l",[]]}`) + 1) / len("null,")

// worstMessage is the size of that reply.
const worstMessage = len(`{"id":3,"ok":["l",[]]}`) + worstReply*len("null,") - 1

// heapSampler records the highest heap (live and not yet collected objects) seen
// while it runs.
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak atomic.Uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.done.Go(func() {
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			if n := heapNow(); n > h.peak.Load() {
				h.peak.Store(n)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	})
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	h.done.Wait()
	return h.peak.Load()
}

// BenchmarkRelayMemory measures the host memory the relay needs for the worst reply
// a solution can send: one of MaxMessage bytes made of tiny values (a list of about
// 3.4 million Nones), relayed to the tests, which check its length. Each iteration
// runs n such verifications at once in the bubblewrap sandbox; the benchmark reports
// the highest heap seen (sampled every 100 µs) over the heap before the iteration,
// in MB (peak-MB) and per verification as a multiple of the message's size
// (peak/message), and the bytes allocated per verification (alloc-MB/verification).
func BenchmarkRelayMemory(b *testing.B) {
	f := bwrapSandboxes(b)
	task := tasks.Task{ID: "worst", TestCode: fmt.Sprintf("from solution import f\nassert len(f()) == %d\nprint('passed')\n", worstReply)}
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			sbs := make([]rollout.Sandbox, n)
			for i := range sbs {
				sb, err := f.NewSandbox(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				defer sb.Close()
				if err := sb.WriteFile("solution.py", fmt.Appendf(nil, "def f():\n    return [None] * %d\n", worstReply)); err != nil {
					b.Fatal(err)
				}
				sbs[i] = sb
			}
			var peak, allocs float64
			for b.Loop() {
				runtime.GC()
				base := heapNow()
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				h := startHeapSampler()
				var wg sync.WaitGroup
				for _, sb := range sbs {
					wg.Go(func() {
						v, err := reward.Verify(b.Context(), sb, f, task, reward.VerifyOptions{})
						if err != nil || v.Rule != reward.RulePassed {
							b.Errorf("%v %s: %s\n%s", err, v.Rule, v.Reason, v.Output)
						}
					})
				}
				wg.Wait()
				p := h.finish()
				runtime.ReadMemStats(&ms1)
				peak = max(peak, float64(p)-float64(base))
				allocs += float64(ms1.TotalAlloc - ms0.TotalAlloc)
			}
			b.ReportMetric(peak/(1<<20), "peak-MB")
			b.ReportMetric(peak/float64(n)/float64(worstMessage), "peak/message")
			b.ReportMetric(allocs/float64(b.N*n)/(1<<20), "alloc-MB/verification")
		})
	}
}
