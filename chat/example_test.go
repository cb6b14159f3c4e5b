package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
)

// Messages are the OpenAI chat format; an assistant turn that only calls a tool has
// empty content.
func ExampleMessage() {
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "Run the tests."},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_0", Type: "function",
			Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"python test.py"}`}}}},
	}
	b, _ := json.Marshal(msgs[1])
	fmt.Println(string(b))
	// Output: {"role":"assistant","content":"","tool_calls":[{"id":"call_0","type":"function","function":{"name":"terminal","arguments":"{\"command\":\"python test.py\"}"}}]}
}

// Clone copies a conversation deeply, so that the copy can be changed alone.
func ExampleClone() {
	a := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	b := chat.Clone(a)
	b[0].Content = "changed"
	fmt.Println(a[0].Content, b[0].Content)
	// Output: hi changed
}
