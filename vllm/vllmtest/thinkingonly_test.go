package vllmtest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestThinkingOnlyTemplate(t *testing.T) {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "judge"}}
	off := map[string]any{"enable_thinking": false}
	tests := []struct {
		name   string
		opts   []vllmtest.Option
		kwargs map[string]any
		want   string // end of the rendered prompt
	}{
		{"hybrid, thinking off", nil, off, "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"hybrid, thinking on", nil, nil, "<|im_start|>user\njudge<|im_end|>\n<|im_start|>assistant\n"},
		{"thinking-only ignores enable_thinking", []vllmtest.Option{vllmtest.WithThinkingOnlyTemplate()}, off, "<|im_start|>assistant\n<think>\n"},
		{"thinking-only", []vllmtest.Option{vllmtest.WithThinkingOnlyTemplate()}, nil, "<|im_start|>user\njudge<|im_end|>\n<|im_start|>assistant\n<think>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := vllmtest.NewServer(t, tt.opts...)
			ids, err := s.Render(msgs, nil, true, tt.kwargs)
			require.NoError(t, err)
			got := s.Decode(ids)
			require.Equal(t, tt.want, got[max(0, len(got)-len(tt.want)):])
		})
	}
}

func TestThinkingOnlyReasoningParser(t *testing.T) {
	const thought, answer = "the call failed, so maybe \\boxed{1}", "\\boxed{-1}"
	type message struct{ Content, Reasoning *string }
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		opts []vllmtest.Option
		text string
		want message
	}{
		{"no parser: the thought is content", nil, thought + "</think>\n\n" + answer, message{Content: str(thought + "</think>\n\n" + answer)}},
		{"parser: split at </think>", []vllmtest.Option{vllmtest.WithReasoningParser()}, thought + "</think>\n\n" + answer, message{Reasoning: str(thought), Content: str(answer)}},
		{"parser: never closed", []vllmtest.Option{vllmtest.WithReasoningParser()}, thought, message{Reasoning: str(thought)}},
		{"parser: model repeats <think>", []vllmtest.Option{vllmtest.WithReasoningParser()}, "<think>" + thought + "</think>" + answer, message{Reasoning: str(thought), Content: str(answer)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append([]vllmtest.Option{vllmtest.WithThinkingOnlyTemplate(),
				vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string { return []string{tt.text} })}, tt.opts...)
			s := vllmtest.NewServer(t, opts...)
			out := postGen(t, s, "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "judge"}},
				"max_tokens": 200, "chat_template_kwargs": map[string]any{"enable_thinking": false}})
			got := message{Content: out.Choices[0].Message.Content, Reasoning: out.Choices[0].Message.Reasoning}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestThinkingOnlyAgentScript(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithThinkingOnlyTemplate(), vllmtest.WithAgentScript(vllmtest.ScriptByTurn("plan</think>\n\nanswer")))
	prompt, err := s.Render([]chat.Message{{Role: chat.RoleUser, Content: "task"}}, nil, true, nil)
	require.NoError(t, err)
	out := postGen(t, s, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 50})
	require.Equal(t, "plan</think>\n\nanswer", out.Choices[0].Text, "the script answers after a prompt that opened a thought")
}
