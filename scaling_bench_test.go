package agenticopd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/internal/benchfixture"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/sandboxtest"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// scalingLevels are the concurrencies BenchmarkThroughputScaling measures.
var scalingLevels = []int{1, 4, 16, 64}

// rolloutsPerSecond runs n fixture rollouts, c at a time, each as a group of one
// through the env (agent loop, sandbox, canonical verification, reward), and returns
// the rollouts finished per second of wall time and the process's CPU time per rollout
// (the simulator's included).
func rolloutsPerSecond(ctx context.Context, sim *vllmtest.Server, sandboxes rollout.SandboxFactory, task tasks.Task, c, n int) (float64, time.Duration, error) {
	cfg := benchfixture.Config(sim.Client(), sandboxes, 1)
	cfg.MaxRollouts, cfg.DisableOPD = c, true
	env, err := agenticopd.NewEnv(cfg)
	if err != nil {
		return 0, 0, err
	}
	if _, err := env.CollectGroup(ctx, task); err != nil { // calibrate the template once
		return 0, 0, err
	}
	var left atomic.Int64
	left.Store(int64(n))
	eg, ctx := errgroup.WithContext(ctx)
	start, cpu := time.Now(), processCPU()
	for range c {
		eg.Go(func() error {
			for left.Add(-1) >= 0 {
				g, err := env.CollectGroup(ctx, task)
				if err != nil {
					return err
				}
				if g.Rollouts[0].Trajectory.TurnsUsed != benchfixture.Turns {
					return fmt.Errorf("rollout ended after %d turns (%s)", g.Rollouts[0].Trajectory.TurnsUsed, g.Rollouts[0].Trajectory.Stop)
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), (processCPU() - cpu) / time.Duration(n), nil
}

// BenchmarkThroughputScaling measures fixture rollouts per second at 1, 4, 16 and 64
// rollouts in flight against the simulator with 50 ms latency per request and no
// capacity limit, without OPD (BenchmarkOPDOverhead measures it). Each level runs at
// least 4 rollouts and at least as many as it has in flight.
//
// In the fixed sub-benchmark every sandbox command takes 20 ms without CPU
// (rollout/sandbox/sandboxtest), and the canonical verification, which that sandbox
// cannot run, is left out; the figure shows what the library and its simulator cost
// when rollouts wait on I/O: scaling-efficiency-64 is the throughput at
// 64 over 64 times the throughput at 1. In the bwrap sub-benchmark the commands are
// real Python processes in the bubblewrap sandbox, and the machine's cores bound the
// throughput: scaling-efficiency-64-bwrap shows where. cpu-ms/rollout@64 is the
// process's CPU time per rollout at 64 in flight, the simulator's included (the
// bubblewrap sandbox's processes are not this process's).
func BenchmarkThroughputScaling(b *testing.B) {
	for _, kind := range []string{"fixed", "bwrap"} {
		b.Run(kind, func(b *testing.B) {
			var sandboxes rollout.SandboxFactory = sandboxtest.New(sandboxtest.Config{Latency: sandboxLatency, Exec: benchfixture.Exec})
			task, metric := benchfixture.UnverifiedTask(), "scaling-efficiency-64"
			if kind == "bwrap" {
				f, err := bwrap.New(b.Context(), bwrap.Config{})
				if err != nil {
					b.Skipf("the bubblewrap sandbox is not available: %v", err)
				}
				sandboxes, task, metric = f, benchfixture.Task(), "scaling-efficiency-64-bwrap"
			}
			sim := vllmtest.NewServer(b, benchfixture.ServerOptions(1)...)
			sim.AddFault(vllmtest.Fault{Delay: benchLatency})
			sum := make([]float64, len(scalingLevels))
			var cpu64 time.Duration
			for b.Loop() {
				for i, c := range scalingLevels {
					r, cpu, err := rolloutsPerSecond(b.Context(), sim, sandboxes, task, c, max(4, c))
					require.NoError(b, err)
					sum[i] += r
					if c == 64 {
						cpu64 += cpu
					}
				}
			}
			for i, c := range scalingLevels {
				b.ReportMetric(sum[i]/float64(b.N), fmt.Sprintf("rollouts/s@%d", c))
			}
			b.ReportMetric(cpu64.Seconds()*1e3/float64(b.N), "cpu-ms/rollout@64")
			b.ReportMetric(sum[len(sum)-1]/(64*sum[0]), metric)
		})
	}
}
