package reward_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

func ExampleDefault() {
	// A rollout that wrote a file, ran the tests and finished in 7 of 15 turns; the
	// canonical tests exited 0 but printed no "passed".
	msgs := []chat.Message{
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Type: "function", Function: chat.FunctionCall{Name: "write_file"}}}},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Type: "function", Function: chat.FunctionCall{Name: "terminal"}}}},
	}
	c, rule := reward.Correctness(0, "ok\n")
	b, err := reward.Default{}.Score(context.Background(), reward.Input{
		Messages:     msgs,
		TurnsUsed:    7,
		MaxTurns:     15,
		Verification: reward.Verification{Correctness: c, Rule: rule},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("rule %s: reward %.2f = 0.7×%.1f + 0.15×%.1f + 0.15×%.1f\n", rule, b.Reward, b.Correctness, b.Efficiency, b.ToolUsage)
	// Output:
	// rule exit_zero: reward 0.83 = 0.7×0.8 + 0.15×0.8 + 0.15×1.0
}

func ExampleVerify() {
	ctx := context.Background()
	factory, err := bwrap.New(ctx, bwrap.Config{}) // bubblewrap, probed once
	if err != nil {
		panic(err)
	}
	sb, err := factory.NewSandbox(ctx) // the rollout's sandbox
	if err != nil {
		panic(err)
	}
	defer sb.Close()
	task := tasks.Builtin()[3] // flatten, with hidden tests
	// What the agent left: a solution that flattens one level only.
	if err := sb.WriteFile("solution.py", []byte(
		"def flatten(lst):\n    return [y for x in lst for y in (x if isinstance(x, list) else [x])]\n")); err != nil {
		panic(err)
	}
	// The tests run in another sandbox of the same factory.
	v, err := reward.Verify(ctx, sb, factory, task, reward.VerifyOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Rule, v.Correctness)
	// Output:
	// assertion 0.2
}
