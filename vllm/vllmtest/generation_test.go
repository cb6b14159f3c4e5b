package vllmtest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func generate(t *testing.T, s *vllmtest.Server, body map[string]any) completionResponse {
	t.Helper()
	body["return_token_ids"] = true
	var resp completionResponse
	postOK(t, s.URL+"/v1/completions", body, &resp)
	return resp
}

func choiceIDs(r completionResponse) [][]int32 {
	out := make([][]int32, len(r.Choices))
	for i, c := range r.Choices {
		out[i] = c.TokenIDs
	}
	return out
}

func TestSeededReproducibility(t *testing.T) {
	s := vllmtest.NewServer(t)
	prompt := s.Tokenize("<|im_start|>user\nWrite code.<|im_end|>\n<|im_start|>assistant\n")

	a := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 30, "n": 3, "seed": 42})
	b := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 30, "n": 3, "seed": 42})
	if diff := cmp.Diff(choiceIDs(a), choiceIDs(b)); diff != "" {
		t.Errorf("same seed, different samples (-want +got):\n%s", diff)
	}
	require.NotEqual(t, a.Choices[0].TokenIDs, a.Choices[1].TokenIDs, "choices of one request differ")
	c := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 30, "n": 3, "seed": 43})
	require.NotEqual(t, choiceIDs(a), choiceIDs(c), "another seed, other samples")

	g1 := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 30, "temperature": 0, "seed": 1})
	g2 := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 30, "temperature": 0, "seed": 2})
	require.Equal(t, g1.Choices[0].TokenIDs, g2.Choices[0].TokenIDs, "greedy ignores the seed")
	// greedy picks the top-1 token at every step
	seq := append(append([]int32(nil), prompt...), g1.Choices[0].TokenIDs...)
	var sc completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{"prompt": seq, "max_tokens": 1, "prompt_logprobs": 1}, &sc)
	for i := range g1.Choices[0].TokenIDs {
		e := sc.Choices[0].PromptLogprobs[len(prompt)+i][g1.Choices[0].TokenIDs[i]]
		require.Equal(t, 1, e.Rank, "greedy token %d", i)
	}
}

func TestBatchedChoicesOrder(t *testing.T) {
	s := vllmtest.NewServer(t)
	p0 := s.Tokenize("first prompt")
	p1 := s.Tokenize("second prompt, longer")
	batch := generate(t, s, map[string]any{"prompt": [][]int32{p0, p1}, "n": 2, "seed": 5, "max_tokens": 8, "prompt_logprobs": 1})
	require.Len(t, batch.Choices, 4)
	for p, prompt := range [][]int32{p0, p1} {
		single := generate(t, s, map[string]any{"prompt": prompt, "n": 2, "seed": 5, "max_tokens": 8})
		for j := range 2 {
			c := batch.Choices[p*2+j]
			require.Equal(t, p*2+j, c.Index)
			require.Equal(t, prompt, c.PromptTokenIDs)
			require.Len(t, c.PromptLogprobs, len(prompt), "prompt_logprobs are duplicated per choice")
			require.Equal(t, single.Choices[j].TokenIDs, c.TokenIDs, "choice p*n+j is sample j of prompt p")
		}
	}
	completion := 0
	for _, c := range batch.Choices {
		completion += len(c.TokenIDs)
	}
	require.Equal(t, len(p0)+len(p1), batch.Usage.PromptTokens)
	require.Equal(t, completion, batch.Usage.CompletionTokens)
	require.Equal(t, batch.Usage.PromptTokens+completion, batch.Usage.TotalTokens)
}

func TestStringPromptsAndFinishReasons(t *testing.T) {
	s := vllmtest.NewServer(t)
	r := generate(t, s, map[string]any{"prompt": []string{"a b c", "d e f"}, "max_tokens": 1, "seed": 1})
	require.Len(t, r.Choices, 2)
	require.Equal(t, s.Tokenize("d e f"), r.Choices[1].PromptTokenIDs)
	for _, c := range r.Choices {
		require.Len(t, c.TokenIDs, 1)
		if c.TokenIDs[0] != vllmtest.ImEnd && c.TokenIDs[0] != vllmtest.EndOfText {
			require.Equal(t, "length", c.FinishReason)
		}
	}
	// an unscripted turn reaches <|im_end|> and stops there, without it in the text
	long := generate(t, s, map[string]any{"prompt": "<|im_start|>assistant\n", "max_tokens": 2000, "n": 4, "seed": 9})
	stopped := 0
	for _, c := range long.Choices {
		if c.FinishReason == "stop" {
			stopped++
			last := c.TokenIDs[len(c.TokenIDs)-1]
			require.True(t, last == vllmtest.ImEnd || last == vllmtest.EndOfText)
			require.Equal(t, s.Decode(c.TokenIDs[:len(c.TokenIDs)-1]), c.Text)
		}
	}
	require.Positive(t, stopped)
}

func TestStopStrings(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(vllmtest.ScriptInput) (string, bool) {
		return "alpha beta gamma", true
	}))
	prompt := "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
	r := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 50, "stop": []string{" gam"}})
	c := r.Choices[0]
	require.Equal(t, "alpha beta", c.Text)
	require.Equal(t, "stop", c.FinishReason)
	require.Equal(t, " gam", c.StopReason)
	require.Contains(t, s.Decode(c.TokenIDs), " gam", "the ids keep the tokens that formed the stop string")
}

func TestLogprobsCap(t *testing.T) {
	tests := []struct {
		name   string
		opts   []vllmtest.Option
		body   map[string]any
		path   string
		want   string
		nested bool
	}{
		{"prompt logprobs", nil, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 1, "prompt_logprobs": 50}, "/v1/completions",
			"Requested prompt logprobs of 50, which is greater than max allowed: 20", true},
		{"sample logprobs", nil, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 1, "logprobs": 21}, "/v1/completions",
			"Requested sample logprobs of 21, which is greater than max allowed: 20", true},
		{"raised cap", []vllmtest.Option{vllmtest.WithMaxLogprobs(30)}, map[string]any{"prompt": []int{1, 2}, "max_tokens": 1, "prompt_logprobs": 31}, "/v1/completions",
			"Requested prompt logprobs of 31, which is greater than max allowed: 30", true},
		{"flat error shape", []vllmtest.Option{vllmtest.WithFlatErrors()}, map[string]any{"prompt": []int{1, 2}, "max_tokens": 1, "prompt_logprobs": 50}, "/v1/completions",
			"Requested prompt logprobs of 50, which is greater than max allowed: 20", false},
		{"chat top_logprobs", nil, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}, "logprobs": true, "top_logprobs": 25}, "/v1/chat/completions",
			"Requested sample logprobs of 25, which is greater than max allowed: 20", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := vllmtest.NewServer(t, tt.opts...)
			status, raw := post(t, s.URL+tt.path, tt.body)
			require.Equal(t, http.StatusBadRequest, status)
			if tt.nested {
				var e apiError
				require.NoError(t, json.Unmarshal(raw, &e))
				require.Equal(t, tt.want, e.Error.Message)
				require.Equal(t, "BadRequestError", e.Error.Type)
				require.Equal(t, 400, e.Error.Code)
				return
			}
			var flat struct {
				Object  string `json:"object"`
				Message string `json:"message"`
				Type    string `json:"type"`
				Param   any    `json:"param"`
				Code    int    `json:"code"`
			}
			require.NoError(t, json.Unmarshal(raw, &flat))
			require.Equal(t, "error", flat.Object)
			require.Equal(t, tt.want, flat.Message)
			require.Equal(t, "BadRequestError", flat.Type)
			require.Nil(t, flat.Param)
			require.Equal(t, 400, flat.Code)
		})
	}
}

func TestCompletionBadRequests(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxModelLen(64))
	long := make([]int32, 60)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"context length", map[string]any{"prompt": long, "max_tokens": 10},
			"This model's maximum context length is 64 tokens. However, you requested 70 tokens (60 in the messages, 10 in the completion). Please reduce the length of the messages or completion."},
		{"max_tokens zero", map[string]any{"prompt": []int{1}, "max_tokens": 0}, "max_tokens must be at least 1, got 0."},
		{"empty prompt", map[string]any{"prompt": "", "max_tokens": 1}, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"empty id list", map[string]any{"prompt": []int{}, "max_tokens": 1}, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"empty batch member", map[string]any{"prompt": [][]int{{1}, {}}, "max_tokens": 1}, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"missing prompt", map[string]any{"max_tokens": 1}, "Either prompt or prompt_embeds must be provided and non-empty."},
		{"id out of vocabulary", map[string]any{"prompt": []int{1, 999999}, "max_tokens": 1}, "Token id 999999 is out of vocabulary"},
		{"negative id", map[string]any{"prompt": [][]int{{-3}}, "max_tokens": 1}, "Token id -3 is out of vocabulary"},
		{"n zero", map[string]any{"prompt": []int{1}, "n": 0}, "n must be at least 1, got 0."},
		{"negative temperature", map[string]any{"prompt": []int{1}, "temperature": -1}, "temperature must be non-negative, got -1."},
		{"top_p zero", map[string]any{"prompt": []int{1}, "top_p": 0}, "top_p must be in (0, 1], got 0."},
		{"negative prompt_logprobs", map[string]any{"prompt": []int{1}, "prompt_logprobs": -5}, "1 validation error: Value error, `prompt_logprobs` must be a positive value."},
		{"negative logprobs", map[string]any{"prompt": []int{1}, "logprobs": -5}, "1 validation error: Value error, `logprobs` must be a positive value."},
		{"mixed prompt", map[string]any{"prompt": []any{1, "a"}}, "1 validation error: prompt must be a string, a list of strings, a list of token ids or a list of token-id lists"},
		{"stream", map[string]any{"prompt": []int{1}, "stream": true}, "streaming is not supported by vllmtest"},
		{"bad stop", map[string]any{"prompt": []int{1}, "stop": 3}, "1 validation error: stop must be a string or a list of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, s.URL+"/v1/completions", tt.body)
			require.Equal(t, http.StatusBadRequest, status, "body %s", raw)
			var e apiError
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, tt.want, e.Error.Message)
		})
	}
	t.Run("invalid JSON", func(t *testing.T) {
		resp, err := http.Post(s.URL+"/v1/completions", "application/json", stringsReader("{"))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		var e apiError
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		require.Contains(t, e.Error.Message, "invalid JSON body")
	})
}

func TestModelSeedChangesDistribution(t *testing.T) {
	a := vllmtest.NewServer(t)
	b := vllmtest.NewServer(t, vllmtest.WithModelSeed(7))
	prompt := a.Tokenize("The tests pass and the function is done.")
	require.Equal(t, prompt, b.Tokenize("The tests pass and the function is done."), "same tokenizer")
	var ra, rb completionResponse
	postOK(t, a.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": 5}, &ra)
	postOK(t, b.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": 5}, &rb)
	require.NotEqual(t, ra.Choices[0].PromptLogprobs, rb.Choices[0].PromptLogprobs)
}

func TestEchoAndStopTokenIDs(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(vllmtest.ScriptByTurn("one two three")))
	prompt := "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"

	r := generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20, "echo": true, "skip_special_tokens": false})
	require.Equal(t, prompt+"one two three", r.Choices[0].Text, "echo prepends the prompt; the stop token is not text")
	r = generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20, "echo": true})
	require.Equal(t, "user\nx\nassistant\none two three", r.Choices[0].Text, "skip_special_tokens drops <|…|> tokens")

	ids := s.Tokenize("one two three")
	stopID := ids[1]
	r = generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20, "stop_token_ids": []int32{stopID}})
	c := r.Choices[0]
	require.Equal(t, "stop", c.FinishReason)
	require.Equal(t, ids[:2], c.TokenIDs)
	require.Equal(t, float64(stopID), c.StopReason, "stop_reason names the stop id")
	require.Equal(t, s.Decode(ids[:1]), c.Text)

	r = generate(t, s, map[string]any{"prompt": prompt, "max_tokens": 20, "stop_token_ids": []int32{stopID}, "include_stop_str_in_output": true})
	c = r.Choices[0]
	require.Equal(t, ids[:2], c.TokenIDs)
	require.Equal(t, s.Decode(ids[:2]), c.Text, "include_stop_str_in_output keeps the stop token's text")

	early := vllmtest.NewServer(t, vllmtest.WithAgentScript(vllmtest.ScriptByTurn("done<|im_end|>ignored")))
	r = generate(t, early, map[string]any{"prompt": prompt, "max_tokens": 20})
	require.Equal(t, append(s.Tokenize("done"), vllmtest.ImEnd), r.Choices[0].TokenIDs, "a stop token inside scripted text ends the turn")
	require.Equal(t, "done", r.Choices[0].Text)
	require.Nil(t, r.Choices[0].StopReason, "<|im_end|> is the tokenizer's eos: stop_reason null")

	eot := vllmtest.NewServer(t, vllmtest.WithAgentScript(vllmtest.ScriptByTurn("done<|endoftext|>")))
	r = generate(t, eot, map[string]any{"prompt": prompt, "max_tokens": 20, "skip_special_tokens": false})
	require.Equal(t, append(s.Tokenize("done"), vllmtest.EndOfText), r.Choices[0].TokenIDs)
	require.Equal(t, "done", r.Choices[0].Text)
	require.Equal(t, "stop", r.Choices[0].FinishReason)
	require.Equal(t, float64(vllmtest.EndOfText), r.Choices[0].StopReason, "<|endoftext|> is a generation_config eos id, named like a stop id")
}
