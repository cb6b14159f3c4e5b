package reward_test

import (
	"context"
	"testing"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
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

// BenchmarkVerify measures one canonical test run of a built-in task, python3 start-up
// included, in the test-only unconfined sandbox.
func BenchmarkVerify(b *testing.B) {
	task := tasks.Builtin()[0]
	sb := &dirSandbox{dir: b.TempDir()}
	if err := sb.WriteFile("solution.py", []byte(task.ReferenceSolution)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		v, err := reward.Verify(ctx, sb, task, reward.VerifyOptions{})
		if err != nil || v.Rule != reward.RulePassed {
			b.Fatal(v, err)
		}
	}
}
