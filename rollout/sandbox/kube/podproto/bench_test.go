package podproto_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// childCPU is the CPU time of the reaped children of this process.
func childCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunOverhead is the cost of one call of run beyond the command: the
// helper's start, the framing and the client, for /bin/true (no exec through an
// API server: that is the backend's).
func BenchmarkRunOverhead(b *testing.B) {
	c, _, _ := newClient(b, podproto.Config{})
	ctx := context.Background()
	cpu0 := childCPU(b)
	start := time.Now()
	for b.Loop() {
		res, err := c.Run(ctx, rollout.Command{Argv: []string{"/bin/true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N)/1000, "ms/call")
	b.ReportMetric(float64((childCPU(b)-cpu0).Microseconds())/float64(b.N)/1000, "child-cpu-ms/call")
}

// BenchmarkRestoreDeepChain is Restore of a chain of 100,000 mode-000
// directories, in the helper's CPU time.
func BenchmarkRestoreDeepChain(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		c, _, root := newClient(b, podproto.Config{})
		makeChain(b, root, 100000)
		cpu0 := childCPU(b)
		b.StartTimer()
		if err := c.Restore(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64((childCPU(b) - cpu0).Milliseconds()), "helper-cpu-ms")
		if n := checkChain(b, root); n != 100000 {
			b.Fatalf("%d directories restored", n)
		}
		removeChain(root)
		b.StartTimer()
	}
}
