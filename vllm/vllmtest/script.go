package vllmtest

import (
	"encoding/json"

	"github.com/agentic-opd/agenticopd/chat"
)

// ScriptInput is what an agent script (see [WithAgentScript]) sees for one choice of a
// /v1/completions prompt that ends with the assistant generation prompt.
type ScriptInput struct {
	// Messages is the conversation parsed back from the prompt: system (without the
	// tools section), user, assistant (tool calls parsed from <tool_call> blocks, with
	// ids "call_0", "call_1", …) and tool messages (from <tool_response> blocks).
	Messages []chat.Message
	// HasTools reports whether the system prompt carried a tools section.
	HasTools bool
	// Turn is the 1-based number of the assistant turn being generated.
	Turn int
	// Prompt is the prompt text with special tokens kept.
	Prompt string
	// PromptTokens are the prompt ids.
	PromptTokens []int32
	// PromptIndex and Choice locate the choice: it is answered at p*n+j.
	PromptIndex, Choice int
	// Seed is the request's seed, nil when it had none.
	Seed *int64
}

// ChatScriptInput is what a chat script (see [WithChatScript]) sees for one
// /v1/chat/completions request.
type ChatScriptInput struct {
	// Messages are the request's messages.
	Messages []chat.Message
	// Tools are the request's tool definitions.
	Tools []chat.Tool
	// N is the number of choices asked for.
	N int
	// Prompt is the rendered prompt text; PromptTokens its ids.
	Prompt string
	// PromptTokens are the ids of Prompt.
	PromptTokens []int32
}

// generationPrompts are the prompt endings after which an assistant turn starts.
var generationPrompts = []string{"<|im_start|>assistant\n<think>\n\n</think>\n\n", thinkingOnlyPrompt, "<|im_start|>assistant\n"}

func toChatMessages(msgs []wireMessage) []chat.Message {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		out[i] = chat.Message{Role: m.Role, Content: string(m.Content), ToolCallID: m.ToolCallID, Name: m.Name}
		if m.ReasoningContent != nil {
			out[i].ReasoningContent = *m.ReasoningContent
		}
		for _, tc := range m.ToolCalls {
			args := string(tc.Function.Arguments)
			var s string
			if json.Unmarshal(tc.Function.Arguments, &s) == nil {
				args = s
			}
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall{
				ID: tc.ID, Type: tc.Type, Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: args},
			})
		}
	}
	return out
}

func toChatTools(raw []json.RawMessage) []chat.Tool {
	var out []chat.Tool
	for _, r := range raw {
		var t chat.Tool
		if json.Unmarshal(r, &t) == nil {
			out = append(out, t)
		}
	}
	return out
}

// ScriptByTurn returns an agent script (for [WithAgentScript]) that answers assistant
// turn k with texts[k-1], and leaves later turns to the model.
func ScriptByTurn(texts ...string) func(ScriptInput) (string, bool) {
	texts = append([]string(nil), texts...)
	return func(in ScriptInput) (string, bool) {
		if in.Turn < 1 || in.Turn > len(texts) {
			return "", false
		}
		return texts[in.Turn-1], true
	}
}
