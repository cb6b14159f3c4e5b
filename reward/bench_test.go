package reward_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

func BenchmarkDefaultScore(b *testing.B) {
	var msgs []chat.Message
	for range 15 {
		msgs = append(msgs, calls("write_file", "terminal"), chat.Message{Role: chat.RoleTool, Content: "{}"})
	}
	in := reward.Input{Messages: msgs, TurnsUsed: 15, MaxTurns: 15, Verification: reward.Verification{Correctness: 1}}
	ctx := context.Background()
	for b.Loop() {
		if _, err := (reward.Default{}).Score(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify measures one verification of a built-in task, python3 start-up
// included, in the test-only unconfined sandbox. It also reports the CPU time of the
// child processes per verification (child-cpu-ms/op).
func BenchmarkVerify(b *testing.B) {
	f := dirFactory{b}
	sb, _ := f.NewSandbox(context.Background())
	benchVerify(b, sb, f, true)
}

// BenchmarkVerifyBubblewrap measures one verification of a built-in task in the
// library's bubblewrap sandbox, sandbox and python3 start-up included. (The CPU time
// of sandboxed processes is not reported: they are reaped inside their pid namespace.)
func BenchmarkVerifyBubblewrap(b *testing.B) {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	benchVerify(b, sb, f, false)
}

func benchVerify(b *testing.B, sb rollout.Sandbox, tests rollout.SandboxFactory, reportCPU bool) {
	task := tasks.Builtin()[0]
	if err := sb.WriteFile("solution.py", []byte(task.ReferenceSolution)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	cpu0 := childCPU()
	for b.Loop() {
		v, err := reward.Verify(ctx, sb, tests, task, reward.VerifyOptions{})
		if err != nil || v.Rule != reward.RulePassed {
			b.Fatal(v, err)
		}
	}
	if reportCPU {
		b.ReportMetric(float64(childCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "child-cpu-ms/op")
	}
}

// childCPU is the user and system CPU time of the reaped child processes.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyCalls measures the cost of one call from the tests to the solution
// (a round trip through the relay) in the bubblewrap sandbox, reported as us/call.
func BenchmarkVerifyCalls(b *testing.B) {
	const calls = 2000
	task := tasks.Task{ID: "calls", TestCode: fmt.Sprintf("from solution import f\nfor i in range(%d):\n    assert f(i, [i]) == [i + 1]\nprint('passed')\n", calls)}
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if err := sb.WriteFile("solution.py", []byte("def f(i, xs):\n    return [i + 1]\n")); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		v, err := reward.Verify(ctx, sb, f, task, reward.VerifyOptions{})
		if err != nil || v.Rule != reward.RulePassed {
			b.Fatal(v, err)
		}
		total += v.Duration
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N*calls), "us/call")
}

// BenchmarkVerifyCases measures input/output cases in the bubblewrap sandbox: 100
// cases of a trivial program per verification, reported as ms/case (sandbox and
// Python start-up included, which is nearly all of it).
func BenchmarkVerifyCases(b *testing.B) {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if err := sb.WriteFile("solution.py", []byte("import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\n")); err != nil {
		b.Fatal(err)
	}
	task := tasks.Task{ID: "cases", Cases: manyCases()[:100]}
	var total time.Duration
	for b.Loop() {
		v, err := reward.Verify(ctx, sb, f, task, reward.VerifyOptions{})
		if err != nil || v.Rule != reward.RulePassed {
			b.Fatal(v, err)
		}
		total += v.Duration
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N*len(task.Cases)), "ms/case")
}
