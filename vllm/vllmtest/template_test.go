package vllmtest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

var weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`)

var testTools = []json.RawMessage{
	weatherTool,
	json.RawMessage(`{"type":"function","function":{"name":"run_tests","description":"Run pytest.","parameters":{"type":"object","properties":{}}}}`),
}

// toolConversation has a system prompt, a user query, an assistant turn with content
// and two parallel calls (string and object arguments), their two results, and a final
// assistant answer.
func toolConversation() []map[string]any {
	return []map[string]any{
		{"role": "system", "content": "You are a careful engineer."},
		{"role": "user", "content": "Check the weather in Paris and run the tests."},
		{"role": "assistant", "content": "I will do both.", "tool_calls": []any{
			map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}},
			map[string]any{"id": "b", "type": "function", "function": map[string]any{"name": "run_tests", "arguments": ""}},
		}},
		{"role": "tool", "tool_call_id": "a", "content": `{"temperature": 18}`},
		{"role": "tool", "tool_call_id": "b", "content": "3 passed"},
		{"role": "assistant", "content": "It is 18 degrees and the tests pass."},
	}
}

// renderIDs calls /tokenize in chat form.
func renderIDs(t *testing.T, s *vllmtest.Server, msgs []map[string]any, tools []json.RawMessage, gen bool, kwargs map[string]any) []int32 {
	t.Helper()
	body := map[string]any{"messages": msgs, "add_generation_prompt": gen}
	if tools != nil {
		body["tools"] = tools
	}
	if kwargs != nil {
		body["chat_template_kwargs"] = kwargs
	}
	var tok tokenizeResponse
	postOK(t, s.URL+"/tokenize", body, &tok)
	return tok.Tokens
}

func TestTemplateToolConversationGolden(t *testing.T) {
	s := vllmtest.NewServer(t)
	ids := renderIDs(t, s, toolConversation(), testTools, true, nil)
	got := s.Decode(ids)
	golden := filepath.Join("testdata", "tool_conversation.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("rendered conversation (-want +got):\n%s", diff)
	}
	// the turn skeleton: one system, one user, assistant, one merged tool turn, assistant, generation prompt
	require.Equal(t, 6, countOf(ids, vllmtest.ImStart))
	require.Equal(t, 5, countOf(ids, vllmtest.ImEnd))
	require.Equal(t, 2, countOf(ids, vllmtest.ToolResponse))
	require.Equal(t, 4, countOf(ids, vllmtest.ToolCall), "two calls plus two in the system prompt's instructions")
}

func TestTemplateWithoutTools(t *testing.T) {
	s := vllmtest.NewServer(t)
	msgs := []map[string]any{{"role": "system", "content": "S"}, {"role": "user", "content": "U"}}
	tests := []struct {
		name   string
		gen    bool
		kwargs map[string]any
		want   string
	}{
		{"no generation prompt", false, nil, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"},
		{"generation prompt", true, nil, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
		{"thinking off", true, map[string]any{"enable_thinking": false},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"thinking on", true, map[string]any{"enable_thinking": true},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := renderIDs(t, s, msgs, nil, tt.gen, tt.kwargs)
			require.Equal(t, s.Tokenize(tt.want), ids)
		})
	}
	// the thinking-off generation prompt has Qwen3's seven-token shape
	off := renderIDs(t, s, msgs, nil, true, map[string]any{"enable_thinking": false})
	base := renderIDs(t, s, msgs, nil, false, nil)
	g := off[len(base):]
	require.Len(t, g, 7)
	require.Equal(t, vllmtest.ImStart, g[0])
	require.Equal(t, []int32{vllmtest.Think}, g[3:4])
	require.Equal(t, g[4], g[6], `both "\n\n" are the same single token`)
	require.Equal(t, vllmtest.ThinkEnd, g[5])
}

func TestTemplateToolsChangeOnlySystemTurn(t *testing.T) {
	s := vllmtest.NewServer(t)
	msgs := []map[string]any{{"role": "user", "content": "U"}}
	with := s.Decode(renderIDs(t, s, msgs, testTools, false, nil))
	without := s.Decode(renderIDs(t, s, msgs, nil, false, nil))
	require.Equal(t, "<|im_start|>user\nU<|im_end|>\n", without)
	require.Contains(t, with, "# Tools")
	require.Contains(t, with, `{"type": "function", "function": {"name": "get_weather"`)
	require.Contains(t, with, `"required": ["city"]`, "tojson re-serialises with Python separators")
	require.Contains(t, with, "<|im_end|>\n<|im_start|>user\nU<|im_end|>\n")
}

func TestTemplateToolsAsVLLMValidatesThem(t *testing.T) {
	// vLLM hands the template each tool's pydantic model_dump(): type first, then
	// function with name, description and parameters (null when absent), extra keys
	// after the declared ones.
	s := vllmtest.NewServer(t)
	msgs := []map[string]any{{"role": "user", "content": "U"}}
	tools := []json.RawMessage{
		json.RawMessage(`{"function":{"strict":true,"parameters":{"type":"object","properties":{}},"name":"f"},"type":"function"}`),
		json.RawMessage(`{"type":"function","function":{"name":"g"}}`),
	}
	got := s.Decode(renderIDs(t, s, msgs, tools, false, nil))
	require.Contains(t, got, "<tools>\n"+
		`{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object", "properties": {}}, "strict": true}}`+"\n"+
		`{"type": "function", "function": {"name": "g", "description": null, "parameters": null}}`+"\n</tools>")

	for _, tc := range []struct{ name, tool, want string }{
		{"no function", `{"type":"function"}`, "function: Field required"},
		{"not a function", `{"type":"code_interpreter","function":{"name":"f"}}`, "type must be"},
		{"no name", `{"type":"function","function":{"description":"d"}}`, "function.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := post(t, s.URL+"/tokenize", map[string]any{"messages": msgs, "tools": []json.RawMessage{json.RawMessage(tc.tool)}})
			require.Equal(t, 400, status)
			require.Contains(t, string(raw), tc.want)
		})
	}
}

// Rendering a conversation and then the same conversation plus tool results gives a
// token prefix: the delta for tool results can be taken from /tokenize alone.
func TestGenerationPromptDeltaProperty(t *testing.T) {
	s := vllmtest.NewServer(t)
	conv := toolConversation()[:3] // ends with the assistant tool-call turn
	tests := []struct {
		name  string
		extra []map[string]any
	}{
		{"one tool result", []map[string]any{{"role": "tool", "content": "ok"}}},
		{"two tool results", toolConversation()[3:5]},
		{"tool result with newlines", []map[string]any{{"role": "tool", "content": "\n\nline\n\n"}}},
		{"user message", []map[string]any{{"role": "user", "content": "And now?"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := renderIDs(t, s, conv, testTools, false, nil)
			full := renderIDs(t, s, append(slices.Clone(conv), tt.extra...), testTools, true, nil)
			require.Greater(t, len(full), len(base))
			require.Equal(t, base, full[:len(base)], "render(msgs) must be a prefix of render(msgs + new)")
			delta := full[len(base):]
			require.Equal(t, vllmtest.ImStart, delta[0])
			require.Equal(t, 2, countOf(delta, vllmtest.ImStart), "one merged turn plus the generation prompt")
		})
	}
}

// With the thinking template, a re-render after a new user message drops the earlier
// reasoning, and with enable_thinking=false the empty think block of the generation
// prompt disappears once the turn is no longer last: a full re-render does not extend
// the tokens a client holds.
func TestThinkingReRenderDrift(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithThinkingTemplate())
	user := map[string]any{"role": "user", "content": "Q"}
	reasoned := map[string]any{"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nAnswer."}

	t.Run("new user query drops reasoning", func(t *testing.T) {
		held := renderIDs(t, s, []map[string]any{user, reasoned}, nil, false, nil)
		require.Contains(t, s.Decode(held), "Let me think.")
		next := renderIDs(t, s, []map[string]any{user, reasoned, {"role": "user", "content": "More?"}}, nil, true, nil)
		require.NotContains(t, s.Decode(next), "Let me think.")
		require.False(t, isPrefix(held, next), "the re-render must not extend the held tokens")
	})
	t.Run("tool loop keeps reasoning", func(t *testing.T) {
		call := map[string]any{"role": "assistant", "content": "<think>\nR\n</think>\n\n", "tool_calls": []any{
			map[string]any{"id": "x", "type": "function", "function": map[string]any{"name": "run_tests", "arguments": "{}"}},
		}}
		held := renderIDs(t, s, []map[string]any{user, call}, nil, false, nil)
		next := renderIDs(t, s, []map[string]any{user, call, {"role": "tool", "content": "ok"}}, nil, true, nil)
		require.True(t, isPrefix(held, next))
		require.Contains(t, s.Decode(next), "<think>\nR\n</think>\n\n<tool_call>")
	})
	t.Run("thinking off loses the empty think block", func(t *testing.T) {
		off := map[string]any{"enable_thinking": false}
		prompt := renderIDs(t, s, []map[string]any{user}, nil, true, off)
		generated := s.Tokenize("Answer.<|im_end|>\n")
		held := append(slices.Clone(prompt), generated...)
		next := renderIDs(t, s, []map[string]any{user, {"role": "assistant", "content": "Answer."}, {"role": "tool", "content": "ok"}}, nil, true, off)
		require.False(t, isPrefix(held, next))
	})
	t.Run("reasoning before the first </think>, content after the last", func(t *testing.T) {
		twice := map[string]any{"role": "assistant", "content": "<think>\nA\n</think>\nB</think>\n\nC"}
		got := renderIDs(t, s, []map[string]any{user, twice}, nil, false, nil)
		require.Equal(t, s.Tokenize("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nA\n</think>\n\nC<|im_end|>\n"), got)
	})
	t.Run("default template keeps reasoning", func(t *testing.T) {
		plain := vllmtest.NewServer(t)
		held := renderIDs(t, plain, []map[string]any{user, reasoned}, nil, false, nil)
		next := renderIDs(t, plain, []map[string]any{user, reasoned, {"role": "user", "content": "More?"}}, nil, true, nil)
		require.True(t, isPrefix(held, next))
	})
}

func isPrefix(a, b []int32) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

func TestContinueFinalMessage(t *testing.T) {
	s := vllmtest.NewServer(t)
	msgs := []map[string]any{{"role": "user", "content": "U"}, {"role": "assistant", "content": "Part"}}
	var tok tokenizeResponse
	postOK(t, s.URL+"/tokenize", map[string]any{"messages": msgs, "add_generation_prompt": false, "continue_final_message": true}, &tok)
	require.Equal(t, "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nPart", s.Decode(tok.Tokens))

	// Hugging Face's rules for whitespace around the final message.
	for _, tc := range []struct{ name, content, want string }{
		{"trailing whitespace the template kept", "def f():\n    ", "def f():\n    "},
		{"leading and trailing whitespace", "  Part  ", "  Part"},
		{"empty message: the whole rendering", "", "<|im_end|>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []map[string]any{{"role": "user", "content": "U"}, {"role": "assistant", "content": tc.content}}
			var tok tokenizeResponse
			postOK(t, s.URL+"/tokenize", map[string]any{"messages": msgs, "add_generation_prompt": false, "continue_final_message": true}, &tok)
			require.Equal(t, "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"+tc.want, s.Decode(tok.Tokens))
		})
	}
}

func TestTokenizeBadRequests(t *testing.T) {
	s := vllmtest.NewServer(t)
	tests := []struct {
		name string
		body any
		want string
	}{
		{"both continue and generation prompt", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "U"}}, "continue_final_message": true},
			"Cannot set both `continue_final_message` and `add_generation_prompt` to True."},
		{"unknown role", map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "U"}}},
			`messages[0]: unknown role "robot" (want system, user, assistant or tool)`},
		{"neither prompt nor messages", map[string]any{"model": vllmtest.DefaultModel},
			"1 validation error: either `prompt` or `messages` must be given"},
		{"bad tool arguments", map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": "x", "type": "function", "function": map[string]any{"name": "f", "arguments": "{not json"}}}}}},
			"messages[0]: tool_calls[0]: arguments are not valid JSON: \"{not json\""},
		{"enable_thinking not a bool", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "U"}}, "chat_template_kwargs": map[string]any{"enable_thinking": "no"}},
			"chat_template_kwargs.enable_thinking must be a boolean, got no"},
		{"content parts of another type", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url"}}}}},
			`1 validation error: invalid JSON body: content part 0 has type "image_url"; only text parts are supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, s.URL+"/tokenize", tt.body)
			require.Equal(t, http.StatusBadRequest, status)
			var e apiError
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, tt.want, e.Error.Message)
			require.Equal(t, "BadRequestError", e.Error.Type)
			require.Equal(t, 400, e.Error.Code)
		})
	}
}

func TestModelNotFound(t *testing.T) {
	s := vllmtest.NewServer(t)
	for _, path := range []string{"/tokenize", "/detokenize", "/v1/completions", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			status, raw := post(t, s.URL+path, map[string]any{"model": "other", "prompt": "x", "tokens": []int{1}, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
			require.Equal(t, http.StatusNotFound, status)
			var e apiError
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, "The model `other` does not exist.", e.Error.Message)
			require.Equal(t, "NotFoundError", e.Error.Type)
		})
	}
}

func TestRenderMatchesTokenize(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithThinkingTemplate())
	msgs := []chat.Message{
		{Role: chat.RoleSystem, Content: "S"},
		{Role: chat.RoleUser, Content: "U"},
		{Role: chat.RoleAssistant, ReasoningContent: "R", ToolCalls: []chat.ToolCall{{ID: "a", Type: "function", Function: chat.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
		{Role: chat.RoleTool, ToolCallID: "a", Content: "sunny"},
	}
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	got, err := s.Render(msgs, tools, true, map[string]any{"enable_thinking": true})
	require.NoError(t, err)
	var tok tokenizeResponse
	postOK(t, s.URL+"/tokenize", map[string]any{"messages": msgs, "tools": tools, "chat_template_kwargs": map[string]any{"enable_thinking": true}}, &tok)
	require.Equal(t, tok.Tokens, got)
	require.Contains(t, s.Decode(got), "<think>\nR\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}")

	_, err = s.Render([]chat.Message{{Role: "robot"}}, nil, true, nil)
	require.EqualError(t, err, `messages[0]: unknown role "robot" (want system, user, assistant or tool)`)
}
