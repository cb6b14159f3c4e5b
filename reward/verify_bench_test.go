package reward_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// BenchmarkVerifyThroughput runs the canonical verification of a built-in task (its
// reference solution, which passes) in the default bubblewrap sandbox, one
// verification per core at a time (b.RunParallel, each goroutine with its own
// rollout sandbox; every verification makes its own test sandbox), and reports
// canonical verifications per second of wall time.
func BenchmarkVerifyThroughput(b *testing.B) {
	f, err := bwrap.New(b.Context(), bwrap.Config{})
	if err != nil {
		b.Skipf("the bubblewrap sandbox is not available: %v", err)
	}
	task := tasks.Builtin()[0]
	var mu sync.Mutex
	var sandboxes []rollout.Sandbox
	defer func() {
		for _, sb := range sandboxes {
			_ = sb.Close()
		}
	}()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sb, err := f.NewSandbox(b.Context())
		if err != nil {
			b.Error(err)
			return
		}
		mu.Lock()
		sandboxes = append(sandboxes, sb)
		mu.Unlock()
		if err := sb.WriteFile("solution.py", []byte(task.ReferenceSolution)); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			v, err := reward.Verify(b.Context(), sb, f, task, reward.VerifyOptions{})
			if err != nil || v.Rule != reward.RulePassed {
				b.Errorf("verification: %+v, %v", v, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifications/s")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}
