package vllmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// An agent that writes a wrong solution, sees the failing test and fixes it.
func agentScript(in vllmtest.ScriptInput) (string, bool) {
	switch in.Turn {
	case 1:
		return "I will write the solution.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"solution.py\", \"content\": \"def f():\\n    return 1\\n\"}}\n</tool_call>", true
	case 2:
		last := in.Messages[len(in.Messages)-1]
		if last.Role == chat.RoleTool && strings.Contains(last.Content, "failed") {
			return "The test failed; I will fix it.", true
		}
		return "Done.", true
	}
	return "", false
}

func TestAgentScriptTurns(t *testing.T) {
	var mu sync.Mutex
	var seen []vllmtest.ScriptInput
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		mu.Lock()
		seen = append(seen, in)
		mu.Unlock()
		return agentScript(in)
	}))
	msgs := []map[string]any{{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Write f."}}
	prompt := renderIDs(t, s, msgs, testTools, true, nil)

	// turn 1: the scripted text, closed with <|im_end|>, with the model's logprobs
	r := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 500, "logprobs": 0})
	c := r.Choices[0]
	want, _ := agentScript(vllmtest.ScriptInput{Turn: 1})
	require.Equal(t, append(s.Tokenize(want), vllmtest.ImEnd), c.TokenIDs)
	require.Equal(t, want, c.Text)
	require.Equal(t, "stop", c.FinishReason)
	require.Len(t, c.Logprobs.TokenLogprobs, len(c.TokenIDs))

	require.Len(t, seen, 1)
	in := seen[0]
	require.Equal(t, 1, in.Turn)
	require.True(t, in.HasTools)
	require.Equal(t, prompt, in.PromptTokens)
	if diff := cmp.Diff([]chat.Message{{Role: "system", Content: "Be careful."}, {Role: "user", Content: "Write f."}}, in.Messages); diff != "" {
		t.Errorf("parsed conversation (-want +got):\n%s", diff)
	}

	// scoring the scripted ids gives the reported logprobs
	seq := append(append([]int32(nil), prompt...), c.TokenIDs...)
	var sc completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{"prompt": seq, "max_tokens": 1, "prompt_logprobs": 0}, &sc)
	for i, id := range c.TokenIDs {
		require.Equal(t, c.Logprobs.TokenLogprobs[i], sc.Choices[0].PromptLogprobs[len(prompt)+i][id].Logprob)
	}

	// turn 2 sees the tool call and the failing result parsed back from the ids
	held := append(append(append([]int32(nil), prompt...), c.TokenIDs...), s.Tokenize("\n")...)
	delta := s.Tokenize("<|im_start|>user\n<tool_response>\n1 failed\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
	r2 := generate(t, s, map[string]any{"prompt": append(held, delta...), "max_tokens": 100})
	require.Equal(t, "The test failed; I will fix it.", r2.Choices[0].Text)
	in2 := seen[1]
	require.Equal(t, 2, in2.Turn)
	require.Len(t, in2.Messages, 4)
	asst := in2.Messages[2]
	require.Equal(t, "I will write the solution.", asst.Content)
	require.Len(t, asst.ToolCalls, 1)
	require.Equal(t, "write_file", asst.ToolCalls[0].Function.Name)
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(asst.ToolCalls[0].Function.Arguments), &args))
	require.Equal(t, "solution.py", args["path"])
	require.Equal(t, chat.Message{Role: chat.RoleTool, Content: "1 failed"}, in2.Messages[3])

	// a prompt that does not end with the generation prompt is sampled, not scripted
	n := len(seen)
	generate(t, s, map[string]any{"prompt": "plain text", "max_tokens": 3})
	require.Len(t, seen, n)
}

func TestAgentScriptTruncation(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(vllmtest.ScriptInput) (string, bool) {
		return "This answer is far longer than the token budget allows.", true
	}))
	r := generate(t, s, map[string]any{"prompt": "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n", "max_tokens": 3})
	c := r.Choices[0]
	require.Equal(t, "length", c.FinishReason)
	require.Len(t, c.TokenIDs, 3)
	require.NotContains(t, c.TokenIDs, vllmtest.ImEnd)
	require.Equal(t, s.Tokenize("This answer is far longer than the token budget allows.")[:3], c.TokenIDs)
}

func TestAgentScriptThroughClient(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(agentScript))
	c := s.Client()
	ctx := context.Background()
	r, err := c.Render(ctx, rollout.RenderRequest{Messages: []chat.Message{{Role: "user", Content: "Write f."}}, AddGenerationPrompt: true})
	require.NoError(t, err)
	g, err := c.Generate(ctx, rollout.GenerateRequest{Prompt: r.Tokens, MaxTokens: 200, Sampling: sampling.Neutral(1)})
	require.NoError(t, err)
	require.Equal(t, rollout.FinishStop, g.FinishReason)
	require.Equal(t, vllmtest.ImEnd, g.Tokens[len(g.Tokens)-1])
	require.Contains(t, g.Text, "<tool_call>")
}

func TestChatScriptJudge(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(in vllmtest.ChatScriptInput) []string {
		if in.Messages[0].Content != "judge" {
			return nil
		}
		out := make([]string, in.N)
		for j := range out {
			out[j] = "Vote " + string(rune('A'+j)) + "\n\\boxed{1}"
		}
		return out
	}))
	var resp struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role      string          `json:"role"`
				Content   *string         `json:"content"`
				ToolCalls []chat.ToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string  `json:"finish_reason"`
			TokenIDs     []int32 `json:"token_ids"`
		} `json:"choices"`
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
		Usage          struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	postOK(t, s.URL+"/v1/chat/completions", map[string]any{
		"messages": []any{map[string]any{"role": "system", "content": "judge"}, map[string]any{"role": "user", "content": "Was it good?"}},
		"n":        3, "return_token_ids": true,
	}, &resp)
	require.Len(t, resp.Choices, 3)
	for j, c := range resp.Choices {
		require.Equal(t, j, c.Index)
		require.Equal(t, "assistant", c.Message.Role)
		require.Equal(t, "Vote "+string(rune('A'+j))+"\n\\boxed{1}", *c.Message.Content)
		require.Empty(t, c.Message.ToolCalls)
		require.NotNil(t, c.Message.ToolCalls, "tool_calls is an empty list, not null")
		require.Equal(t, "stop", c.FinishReason)
		require.Equal(t, vllmtest.ImEnd, c.TokenIDs[len(c.TokenIDs)-1])
	}
	require.Equal(t, s.Tokenize("<|im_start|>system\njudge<|im_end|>\n<|im_start|>user\nWas it good?<|im_end|>\n<|im_start|>assistant\n"), resp.PromptTokenIDs)
	require.Equal(t, len(resp.PromptTokenIDs), resp.Usage.PromptTokens)
}

func TestChatToolCalls(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string {
		return []string{"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"}
	}))
	type message struct {
		Content   *string         `json:"content"`
		ToolCalls []chat.ToolCall `json:"tool_calls"`
	}
	var resp struct {
		Choices []struct {
			Message      message `json:"message"`
			FinishReason string  `json:"finish_reason"`
			Logprobs     struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float32 `json:"logprob"`
					Bytes       []int   `json:"bytes"`
					TopLogprobs []struct {
						Token   string  `json:"token"`
						Logprob float32 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	postOK(t, s.URL+"/v1/chat/completions", map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "Weather?"}},
		"tools":    []json.RawMessage{weatherTool}, "logprobs": true, "top_logprobs": 2,
	}, &resp)
	c := resp.Choices[0]
	require.Equal(t, "tool_calls", c.FinishReason)
	require.Equal(t, "Let me check.\n", *c.Message.Content)
	require.Len(t, c.Message.ToolCalls, 1)
	tc := c.Message.ToolCalls[0]
	require.True(t, strings.HasPrefix(tc.ID, "chatcmpl-tool-"))
	require.Equal(t, "function", tc.Type)
	require.Equal(t, chat.FunctionCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}, tc.Function)
	require.NotEmpty(t, c.Logprobs.Content)
	for _, lp := range c.Logprobs.Content {
		require.Len(t, lp.TopLogprobs, 2)
		require.Equal(t, lp.Token, lp.TopLogprobs[0].Token, "the sampled token comes first")
		require.Equal(t, lp.Logprob, lp.TopLogprobs[0].Logprob)
		require.Len(t, lp.Bytes, len(lp.Token))
	}

	// vLLM's hermes parser: a last block left unclosed still counts; a block without
	// "arguments" (or that is not JSON) leaves the whole text as content
	for _, tc := range []struct {
		name, text string
		calls      []chat.FunctionCall
	}{
		{"unclosed last block", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\":1}}\n",
			[]chat.FunctionCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"x": 1}`}}},
		{"no arguments", "<tool_call>\n{\"name\": \"a\"}\n</tool_call>", nil},
		{"not JSON", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\n</tool_call>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string { return []string{tc.text} }))
			var resp struct {
				Choices []struct {
					Message      message `json:"message"`
					FinishReason string  `json:"finish_reason"`
				} `json:"choices"`
			}
			postOK(t, s.URL+"/v1/chat/completions", map[string]any{
				"messages": []any{map[string]any{"role": "user", "content": "Weather?"}},
				"tools":    []json.RawMessage{weatherTool}, "max_tokens": 200,
			}, &resp)
			c := resp.Choices[0]
			var got []chat.FunctionCall
			for _, call := range c.Message.ToolCalls {
				got = append(got, call.Function)
			}
			require.Equal(t, tc.calls, got)
			if tc.calls == nil {
				require.Equal(t, tc.text, *c.Message.Content)
				require.Equal(t, "stop", c.FinishReason)
			} else {
				require.Nil(t, c.Message.Content)
				require.Equal(t, "tool_calls", c.FinishReason)
			}
		})
	}

	t.Run("calls found in a turn cut by max_tokens", func(t *testing.T) {
		block := "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
		s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string { return []string{block + " and some more words"} }))
		var resp struct {
			Choices []struct {
				Message      message `json:"message"`
				FinishReason string  `json:"finish_reason"`
			} `json:"choices"`
		}
		postOK(t, s.URL+"/v1/chat/completions", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "Weather?"}},
			"tools":    []json.RawMessage{weatherTool}, "max_tokens": len(s.Tokenize(block)) + 1,
		}, &resp)
		require.Len(t, resp.Choices[0].Message.ToolCalls, 1)
		require.Equal(t, "tool_calls", resp.Choices[0].FinishReason, "as vLLM, not length")
	})

	// without tools in the request the same text stays content
	var plain struct {
		Choices []struct {
			Message      message `json:"message"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
	}
	postOK(t, s.URL+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Weather?"}}}, &plain)
	require.Equal(t, "stop", plain.Choices[0].FinishReason)
	require.Contains(t, *plain.Choices[0].Message.Content, "<tool_call>")
	require.Empty(t, plain.Choices[0].Message.ToolCalls)
}

func TestChatSampledAndValidation(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxModelLen(40))
	var resp struct {
		Choices []struct {
			FinishReason string  `json:"finish_reason"`
			TokenIDs     []int32 `json:"token_ids"`
		} `json:"choices"`
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
	}
	postOK(t, s.URL+"/v1/chat/completions", map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "seed": 1, "return_token_ids": true,
	}, &resp)
	require.LessOrEqual(t, len(resp.PromptTokenIDs)+len(resp.Choices[0].TokenIDs), 40, "no max_tokens fills up to the context length")

	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"top_logprobs without logprobs", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}, "top_logprobs": 2},
			"1 validation error: Value error, when using `top_logprobs`, `logprobs` must be set to true."},
		{"no messages", map[string]any{"messages": []any{}}, "1 validation error: messages must be a non-empty list"},
		{"too long", map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 50)}}, "max_tokens": 5},
			"This model's maximum context length is 40 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, s.URL+"/v1/chat/completions", tt.body)
			require.Equal(t, 400, status)
			var e apiError
			require.NoError(t, json.Unmarshal(raw, &e))
			require.True(t, strings.HasPrefix(e.Error.Message, tt.want), "message %q", e.Error.Message)
		})
	}
}

func TestChatContextLengthMessages(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxModelLen(40))
	content := strings.Repeat("word ", 50)
	n := len(s.Tokenize("<|im_start|>user\n" + content + "<|im_end|>\n<|im_start|>assistant\n"))
	require.Greater(t, n, 40)
	msgs := []any{map[string]any{"role": "user", "content": content}}
	for _, tt := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"no max_tokens", map[string]any{"messages": msgs},
			fmt.Sprintf("This model's maximum context length is 40 tokens. However, you requested %d tokens in the messages, Please reduce the length of the messages.", n)},
		{"max_completion_tokens 0 falls through to none", map[string]any{"messages": msgs, "max_completion_tokens": 0},
			fmt.Sprintf("This model's maximum context length is 40 tokens. However, you requested %d tokens in the messages, Please reduce the length of the messages.", n)},
		{"max_tokens", map[string]any{"messages": msgs, "max_tokens": 5},
			fmt.Sprintf("This model's maximum context length is 40 tokens. However, you requested %d tokens (%d in the messages, 5 in the completion). Please reduce the length of the messages or completion.", n+5, n)},
		{"max_completion_tokens wins", map[string]any{"messages": msgs, "max_tokens": 5, "max_completion_tokens": 7},
			fmt.Sprintf("This model's maximum context length is 40 tokens. However, you requested %d tokens (%d in the messages, 7 in the completion). Please reduce the length of the messages or completion.", n+7, n)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, s.URL+"/v1/chat/completions", tt.body)
			require.Equal(t, 400, status)
			var e apiError
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, tt.want, e.Error.Message)
		})
	}
}

func TestScriptByTurn(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(vllmtest.ScriptByTurn("first", "second")))
	prompt := "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
	r1 := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20})
	require.Equal(t, "first", r1.Choices[0].Text)
	prompt += "first<|im_end|>\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	r2 := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20})
	require.Equal(t, "second", r2.Choices[0].Text)
	prompt += "second<|im_end|>\n<|im_start|>user\ny<|im_end|>\n<|im_start|>assistant\n"
	r3 := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20, "temperature": 0})
	plain := vllmtest.NewServer(t)
	want := generate(t, plain, map[string]any{"prompt": prompt, "max_tokens": 20, "temperature": 0})
	require.Equal(t, want.Choices[0].TokenIDs, r3.Choices[0].TokenIDs, "turn 3 comes from the model")
}
