// Package chat holds the OpenAI-format conversation types shared by every role in
// agenticopd: the agent loop records them, the vLLM client sends them to /tokenize and
// /v1/chat/completions, the judge reads them and Atropos stores them in "messages".
//
// The types carry data only. Token ids are never derived from them: see the rollout
// package for the token-exact record of a conversation.
package chat

import "encoding/json"

// Roles used in [Message.Role].
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of an OpenAI-format conversation.
//
// Content is a plain string; multimodal parts are out of scope. For an assistant
// message that only calls tools, Content is "" and ToolCalls is non-empty.
type Message struct {
	Role       string     `json:"role"`                   // RoleSystem, RoleUser, RoleAssistant or RoleTool
	Content    string     `json:"content"`                // the text
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant's tool calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // a tool message's call
	Name       string     `json:"name,omitempty"`         // a tool message's function name
	// ReasoningContent is the model's reasoning when a server separates it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// ToolCall is one function call made by an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`       // "call_0", …, answered by a tool message's ToolCallID
	Type     string       `json:"type"`     // always "function"
	Function FunctionCall `json:"function"` // what is called
}

// FunctionCall names the function and carries its arguments as a JSON string, exactly as
// the OpenAI format does.
type FunctionCall struct {
	Name      string `json:"name"`      // the function
	Arguments string `json:"arguments"` // a JSON object, as text
}

// Tool is a tool definition as sent in a request's "tools" list.
type Tool struct {
	Type     string       `json:"type"`     // always "function"
	Function ToolFunction `json:"function"` // the callable function
}

// ToolFunction describes a callable function: its name, what it does, and the JSON
// schema of its arguments.
type ToolFunction struct {
	Name        string          `json:"name"`                  // the name the model calls
	Description string          `json:"description,omitempty"` // what it does, for the model
	Parameters  json.RawMessage `json:"parameters,omitempty"`  // JSON schema of the arguments
}

// Clone returns a deep copy of msgs, so that callers may modify the copy freely.
func Clone(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.ToolCalls != nil {
			out[i].ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		}
	}
	return out
}
