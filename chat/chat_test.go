package chat_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
)

func TestCloneIsDeep(t *testing.T) {
	msgs := []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Type: "function", Function: chat.FunctionCall{Name: "terminal"}}}}}
	c := chat.Clone(msgs)
	c[0].Content = "changed"
	c[0].ToolCalls[0].Function.Name = "patch"
	assert.Empty(t, msgs[0].Content)
	assert.Equal(t, "terminal", msgs[0].ToolCalls[0].Function.Name)
	assert.Nil(t, chat.Clone(nil))
}

func TestMessageJSON(t *testing.T) {
	b, err := json.Marshal(chat.Message{Role: chat.RoleTool, Content: "{}", ToolCallID: "call_0_0"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"tool","content":"{}","tool_call_id":"call_0_0"}`, string(b))
	// An assistant message that only calls tools keeps "content" (Atropos wants the key).
	b, err = json.Marshal(chat.Message{Role: chat.RoleAssistant})
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"assistant","content":""}`, string(b))
}
