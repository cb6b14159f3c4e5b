package vllmtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// qwen3 is what vLLM logs for Qwen3 with --generation-config auto.
var qwen3 = map[string]any{"temperature": 0.6, "top_k": 20, "top_p": 0.95}

type completion struct {
	Choices []struct {
		TokenIDs []int32 `json:"token_ids"`
		Text     string  `json:"text"`
		Message  struct {
			Content   *string `json:"content"`
			Reasoning *string `json:"reasoning"`
		} `json:"message"`
	} `json:"choices"`
}

func postGen(t *testing.T, s *vllmtest.Server, path string, body map[string]any) completion {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out completion
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestGenerationConfigFillsUnsetFields(t *testing.T) {
	plain := vllmtest.NewServer(t)
	// top_k 1 as the model's default makes any unset request greedy.
	greedyDefault := vllmtest.NewServer(t, vllmtest.WithGenerationConfig(map[string]any{"top_k": 1}))
	prompt := plain.Tokenize("The quick brown fox")
	req := func(extra map[string]any) map[string]any {
		m := map[string]any{"prompt": prompt, "max_tokens": 24, "n": 8, "temperature": 1.0, "seed": 11, "return_token_ids": true}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	greedy := postGen(t, plain, "/v1/completions", req(map[string]any{"temperature": 0.0})).Choices[0].TokenIDs

	left := postGen(t, greedyDefault, "/v1/completions", req(nil))
	for _, ch := range left.Choices {
		require.Equal(t, greedy, ch.TokenIDs, "an unset top_k takes the server's default")
	}
	stated := postGen(t, greedyDefault, "/v1/completions", req(map[string]any{"top_k": -1}))
	want := postGen(t, plain, "/v1/completions", req(nil))
	require.Equal(t, want, stated, "a stated top_k wins over the server's default")
	distinct := map[string]bool{}
	for _, ch := range stated.Choices {
		distinct[string(json.RawMessage(mustJSON(t, ch.TokenIDs)))] = true
	}
	require.Greater(t, len(distinct), 1, "temperature 1 without truncation samples different sequences")

	require.Equal(t, []string{"top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"},
		vllmtest.LeftToServer(greedyDefault.Requests()[0]))
	require.Equal(t, []string{"top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"},
		vllmtest.LeftToServer(greedyDefault.Requests()[1]))
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestGenerationConfigChangesSampling(t *testing.T) {
	plain := vllmtest.NewServer(t)
	model := vllmtest.NewServer(t, vllmtest.WithGenerationConfig(qwen3))
	prompt := plain.Tokenize("def fizzbuzz(n):")
	body := map[string]any{"prompt": prompt, "max_tokens": 32, "n": 16, "seed": 5, "return_token_ids": true}
	require.NotEqual(t, postGen(t, plain, "/v1/completions", body), postGen(t, model, "/v1/completions", body),
		"Qwen3's defaults (temperature 0.6, top_k 20, top_p 0.95) sample differently from the OpenAI defaults")
	for k, v := range map[string]any{"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0} {
		body[k] = v
	}
	require.Equal(t, postGen(t, plain, "/v1/completions", body), postGen(t, model, "/v1/completions", body),
		"with every field stated the model's defaults change nothing")
}

func TestGenerationConfigMaxTokensCaps(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithGenerationConfig(map[string]any{"max_tokens": 3}))
	out := postGen(t, s, "/v1/completions", map[string]any{"prompt": s.Tokenize("hello"), "max_tokens": 50, "temperature": 1.0, "return_token_ids": true,
		"stop_token_ids": []int{}, "seed": 1})
	require.LessOrEqual(t, len(out.Choices[0].TokenIDs), 3)
}

func TestGenerationConfigRejectsUnknownKeys(t *testing.T) {
	_, err := vllmtest.Start(vllmtest.WithGenerationConfig(map[string]any{"do_sample": true}))
	require.ErrorContains(t, err, `"do_sample"`)
	_, err = vllmtest.Start(vllmtest.WithGenerationConfig(map[string]any{"top_k": "20"}))
	require.ErrorContains(t, err, "not a number")
}

func TestPenaltiesAndTruncationChangeSampling(t *testing.T) {
	s := vllmtest.NewServer(t)
	prompt := s.Tokenize("the the the the")
	base := map[string]any{"prompt": prompt, "max_tokens": 16, "n": 8, "seed": 9, "temperature": 1.0, "return_token_ids": true}
	ref := postGen(t, s, "/v1/completions", base)
	for k, v := range map[string]any{"repetition_penalty": 1.8, "presence_penalty": 1.5, "frequency_penalty": 1.5, "min_p": 0.2, "top_k": 2} {
		b := map[string]any{k: v}
		for bk, bv := range base {
			b[bk] = bv
		}
		require.NotEqual(t, ref, postGen(t, s, "/v1/completions", b), k)
	}
}

func TestReasoningParser(t *testing.T) {
	script := func(texts ...string) vllmtest.Option {
		return vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string { return texts })
	}
	msgs := []map[string]any{{"role": "user", "content": "judge"}}
	s := vllmtest.NewServer(t, vllmtest.WithReasoningParser(), script("<think>\nhmm \\boxed{1}</think>\n\nThe answer \\boxed{-1}", "<think>still thinking"))
	out := postGen(t, s, "/v1/chat/completions", map[string]any{"messages": msgs, "n": 2, "max_tokens": 200})
	require.Equal(t, "\nhmm \\boxed{1}", *out.Choices[0].Message.Reasoning)
	require.Equal(t, "The answer \\boxed{-1}", *out.Choices[0].Message.Content)
	require.Equal(t, "still thinking", *out.Choices[1].Message.Reasoning)
	require.Nil(t, out.Choices[1].Message.Content, "a model cut while thinking has no content")

	plain := vllmtest.NewServer(t, script("<think>x</think>y"))
	out = postGen(t, plain, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 200})
	require.Nil(t, out.Choices[0].Message.Reasoning)
	require.Equal(t, "<think>x</think>y", *out.Choices[0].Message.Content)
}
