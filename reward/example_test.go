package reward_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
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
