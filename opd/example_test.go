package opd_test

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
)

func ExamplePairs() {
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "Write fizzbuzz(n) in solution.py."},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "1", Type: "function",
			Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"python test_solution.py"}`}}}},
		{Role: chat.RoleTool, Content: "AssertionError: fizzbuzz(15) returned ['1', '2']"},
		{Role: chat.RoleUser, Content: "Please fix it."},
		{Role: chat.RoleAssistant, Content: "Fixed."},
	}
	for _, p := range opd.Pairs(msgs, 20) {
		fmt.Printf("message %d, next state from %s:\n%s\n", p.Message, p.NextStateRole, p.NextState)
	}
	// Output:
	// message 1, next state from tool:
	// AssertionError: fizz
	// ...[truncated]
	// ---
	// Please fix it.
}

func ExampleAppendHint() {
	ctx := []chat.Message{
		{Role: chat.RoleSystem, Content: "You are a skilled Python programmer."},
		{Role: chat.RoleUser, Content: "Write fizzbuzz(n) in solution.py."},
	}
	enhanced := opd.AppendHint(ctx, " Check multiples of 15 first. ")
	fmt.Println(enhanced[1].Content)
	// Output:
	// Write fizzbuzz(n) in solution.py.
	//
	// [user's hint / instruction]
	// Check multiples of 15 first.
}
