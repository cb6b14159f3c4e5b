package vllm_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/judge/judgetest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// These tests run the client against the simulator, which speaks vLLM's JSON over
// real HTTP.

func TestSimRenderGenerateRoundTrip(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		return "I will run the tests.", true
	}))
	c, err := vllm.NewClient(s.URL, fastRetry...) // model resolved from /v1/models
	require.NoError(t, err)
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "You write code."}, {Role: chat.RoleUser, Content: "Fix the bug."}}
	r, err := c.Render(bg, rollout.RenderRequest{Messages: msgs, AddGenerationPrompt: true, ChatTemplateKwargs: map[string]any{"enable_thinking": false}})
	require.NoError(t, err)
	require.Equal(t, s.MaxModelLen(), r.MaxModelLen)
	require.Equal(t, vllmtest.ImStart, r.Tokens[0], "no BOS of our own")

	g, err := c.Generate(bg, rollout.GenerateRequest{Prompt: r.Tokens, MaxTokens: 64, Sampling: sampling.Neutral(1), Seed: new(int64(1))})
	require.NoError(t, err)
	require.Equal(t, rollout.FinishStop, g.FinishReason)
	require.Equal(t, vllmtest.ImEnd, g.Tokens[len(g.Tokens)-1], "the stop token is kept")
	require.Equal(t, "I will run the tests.", s.Decode(g.Tokens[:len(g.Tokens)-1]))
	require.Equal(t, r.Tokens, g.PromptTokens)
	require.Len(t, g.Logprobs, len(g.Tokens))
	for _, lp := range g.Logprobs {
		require.Less(t, lp, float32(0.0001))
		require.GreaterOrEqual(t, lp, float32(vllm.NegInfLogprob))
	}
	require.Equal(t, 1, s.RequestCount("/v1/models"))
}

func TestSimSampledGenerationIsReproducible(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client(fastRetry...)
	prompt := s.Tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
	req := rollout.GenerateRequest{Prompt: prompt, MaxTokens: 8, Sampling: sampling.Neutral(1), Seed: new(int64(42))}
	a, err := c.Generate(bg, req)
	require.NoError(t, err)
	b, err := c.Generate(bg, req)
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.LessOrEqual(t, len(a.Tokens), 8)
}

func TestSimScoreMatchesPromptLogprobs(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(64))
	c := s.Client(fastRetry...)
	tokens := s.Tokenize("<|im_start|>user\ndef add(a, b):\n    return a + b\n<|im_end|>\n")
	require.Greater(t, len(tokens), 8)
	positions := []int{1, 2, len(tokens) - 1}
	const k = 50
	res, err := c.Score(bg, scorer.Request{K: k, Sequences: []scorer.Sequence{
		{Tokens: tokens, Positions: positions},
		{Tokens: tokens[:5], Positions: []int{4}},
	}})
	require.NoError(t, err)
	require.Equal(t, 1, s.RequestCount("/v1/completions"), "both sequences in one request")

	// The same numbers straight from prompt_logprobs.
	resp, err := c.Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{tokens}, MaxTokens: 1, PromptLogprobs: new(k)})
	require.NoError(t, err)
	pl := resp.Choices[0].PromptLogprobs
	sr := res.Sequences[0]
	for i, p := range positions {
		ids, lps := sr.Top(i)
		require.Len(t, ids, k)
		require.True(t, slices.IsSortedFunc(lps, func(a, b float32) int {
			switch {
			case a > b:
				return -1
			case a < b:
				return 1
			}
			return 0
		}), "sorted by rank, most likely first")
		for e, id := range ids {
			lp, rank, ok := pl.Lookup(p, id)
			require.True(t, ok)
			require.Equal(t, lp, lps[e])
			require.Equal(t, int32(e+1), rank)
		}
		lp, _, ok := pl.Lookup(p, tokens[p])
		require.True(t, ok)
		require.Equal(t, lp, sr.TokenLogprobs[i])
	}
}

func TestSimMaxLogprobsCap(t *testing.T) {
	for _, flat := range []bool{false, true} {
		var opts []vllmtest.Option
		if flat {
			opts = append(opts, vllmtest.WithFlatErrors())
		}
		s := vllmtest.NewServer(t, opts...)
		c := s.Client(fastRetry...)
		_, err := c.Score(bg, scorer.Request{K: 50, Sequences: []scorer.Sequence{{Tokens: s.Tokenize("hello world"), Positions: []int{1}}}})
		require.ErrorIs(t, err, vllm.ErrMaxLogprobs, "flat=%v", flat)
		var ml *vllm.MaxLogprobsError
		require.ErrorAs(t, err, &ml)
		require.Equal(t, 20, ml.Max)
		require.Equal(t, 50, ml.Requested)
		require.Contains(t, err.Error(), "--max-logprobs 50")
		require.Equal(t, 1, s.RequestCount("/v1/completions"), "a 400 is not retried")
	}
}

func TestSimContextLengthAndModelNotFound(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxModelLen(64))
	c := s.Client(fastRetry...)
	_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: s.Tokenize("hello"), MaxTokens: 100})
	require.ErrorIs(t, err, vllm.ErrContextLength)

	other := s.Client(append([]vllm.Option{vllm.WithModel("no-such-model")}, fastRetry...)...)
	_, err = other.Generate(bg, rollout.GenerateRequest{Prompt: s.Tokenize("hello"), MaxTokens: 1})
	require.ErrorIs(t, err, vllm.ErrModelNotFound)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)
}

func TestSimFaultsAreRetried(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client(fastRetry...)
	s.FailNext("/version", 2, http.StatusServiceUnavailable, "")
	_, err := c.Version(bg)
	require.NoError(t, err)
	require.Equal(t, 3, s.RequestCount("/version"))

	remove := s.AddFault(vllmtest.Fault{Path: "/version", Drop: true, Times: 1})
	defer remove()
	_, err = c.Version(bg)
	require.NoError(t, err, "a dropped connection is retried")

	s.AddFault(vllmtest.Fault{Path: "/detokenize", Malformed: true})
	_, err = c.Detokenize(bg, []int32{1})
	require.ErrorContains(t, err, "decode response")
}

func TestSimDelayHonoursDeadline(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client(fastRetry...)
	s.AddFault(vllmtest.Fault{Path: "/version", Delay: time.Minute})
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	_, err := c.Version(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestSimBatchedChoices(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client(fastRetry...)
	p0, p1 := s.Tokenize("first prompt"), s.Tokenize("a second, longer prompt")
	resp, err := c.Completions(bg, vllm.CompletionRequest{
		Prompts: [][]int32{p0, p1}, N: 3, MaxTokens: 4, Temperature: new(1.0), Seed: new(int64(5)),
		ReturnTokenIDs: true, Logprobs: new(0), ReturnTokensAsTokenIDs: true,
	})
	require.NoError(t, err)
	for p, want := range [][]int32{p0, p1} {
		for _, ch := range resp.ChoicesOf(p, 3) {
			require.Equal(t, want, ch.PromptTokenIDs)
			ids, ok := tokenIDs(ch.Logprobs.Tokens)
			require.True(t, ok)
			require.Equal(t, ch.TokenIDs, ids, "token_ids and token_id:N strings agree")
		}
	}
}

func tokenIDs(toks []string) ([]int32, bool) {
	var out []int32
	for _, s := range toks {
		id, ok := vllm.ParseTokenIDString(s)
		if !ok {
			return nil, false
		}
		out = append(out, id)
	}
	return out, true
}

func TestSimChatWithN(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(in vllmtest.ChatScriptInput) []string {
		return []string{`Looks wrong. \boxed{1} [HINT_START]Run the tests first.[HINT_END]`, `\boxed{-1}`}
	}))
	c := s.Client(fastRetry...)
	got, err := c.Chat(bg, judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "judge this"}}, N: 3, Sampling: sampling.Neutral(0.7), MaxTokens: 200})
	require.NoError(t, err)
	require.Equal(t, []string{`Looks wrong. \boxed{1} [HINT_START]Run the tests first.[HINT_END]`, `\boxed{-1}`, `Looks wrong. \boxed{1} [HINT_START]Run the tests first.[HINT_END]`}, got.Choices)
}

func TestSimPoolFailsOver(t *testing.T) {
	a, b := vllmtest.NewServer(t), vllmtest.NewServer(t)
	p := newTestPool(t, []string{a.URL, b.URL}, vllm.WithModel(a.Model()))
	remove := a.SetError("/tokenize", http.StatusInternalServerError, "")
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	for range 3 {
		_, err := p.Render(bg, rollout.RenderRequest{Messages: msgs, AddGenerationPrompt: true})
		require.NoError(t, err)
	}
	require.Equal(t, 1, a.RequestCount("/tokenize"))
	require.Equal(t, 3, b.RequestCount("/tokenize"))
	require.Equal(t, []string{b.URL}, p.Healthy())
	remove()
	b.SetError("", http.StatusServiceUnavailable, "")
	_, err := p.Render(bg, rollout.RenderRequest{Messages: msgs, AddGenerationPrompt: true})
	require.NoError(t, err, "a answers /health again and is taken back")
	require.Equal(t, []string{a.URL}, p.Healthy())
}

func TestSimJudgeConformance(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(in vllmtest.ChatScriptInput) []string {
		return []string{`The test failed. \boxed{1} [HINT_START]Check the edge case of an empty list before indexing.[HINT_END]`, `\boxed{-1}`}
	}))
	c := s.Client(fastRetry...)
	judgetest.Run(t, func() judge.Judge {
		j, err := judge.NewLLM(c, judge.LLMConfig{})
		require.NoError(t, err)
		return j
	})
	require.Positive(t, s.RequestCount("/v1/chat/completions"))
}

func TestSimPostRetrySendsTheSameBody(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client(fastRetry...)
	s.FailNext("/v1/completions", 1, http.StatusBadGateway, "")
	_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: s.Tokenize("hello there"), MaxTokens: 4, Sampling: sampling.Neutral(0)})
	require.NoError(t, err)
	var bodies []string
	for _, r := range s.Requests() {
		if r.Path == "/v1/completions" {
			bodies = append(bodies, string(r.Body))
		}
	}
	require.Len(t, bodies, 2)
	require.Equal(t, bodies[0], bodies[1])
	require.NotEmpty(t, bodies[0])
}

func TestSimChatPromptLogprobs(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithChatScript(func(in vllmtest.ChatScriptInput) []string { return []string{"PASS"} }))
	c := s.Client(fastRetry...)
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "You judge."}, {Role: chat.RoleUser, Content: "Is 2+2 4?"}}
	resp, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{Messages: msgs, PromptLogprobs: new(3), ReturnTokenIDs: true})
	require.NoError(t, err)

	// The prompt ids are the chat-form /tokenize render of the same messages.
	r, err := c.Render(bg, rollout.RenderRequest{Messages: msgs, AddGenerationPrompt: true})
	require.NoError(t, err)
	require.Equal(t, r.Tokens, resp.PromptTokenIDs)
	require.Equal(t, append(s.Tokenize("PASS"), vllmtest.ImEnd), resp.Choices[0].TokenIDs)

	// The top-level prompt_logprobs agree with completions' on the same ids.
	pl := resp.PromptLogprobs
	require.Equal(t, len(r.Tokens), pl.Len())
	cr, err := c.Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{r.Tokens}, MaxTokens: 1, PromptLogprobs: new(3)})
	require.NoError(t, err)
	if d := cmp.Diff(cr.Choices[0].PromptLogprobs, pl); d != "" {
		t.Errorf("chat vs completions prompt_logprobs (-want +got):\n%s", d)
	}
	ids, _, _ := pl.Entries(0)
	require.Empty(t, ids, "position 0 is null")
	for j := 1; j < pl.Len(); j++ {
		_, _, ok := pl.Lookup(j, r.Tokens[j])
		require.True(t, ok, "position %d has the prompt token", j)
		ids, _, _ := pl.Entries(j)
		require.Contains(t, []int{3, 4}, len(ids), "k or k+1 entries at %d", j)
	}
}

func TestSimScoreSplitKeepsOrder(t *testing.T) {
	// Sequences of different lengths and positions, split into concurrent requests,
	// come back in request order: the split result equals the one-request result.
	s := vllmtest.NewServer(t)
	texts := []string{"def add(a, b):", "return a + b", "All tests passed!", "Traceback (most recent call last):", "x = 1", "print(add(2, 3))", "assert add(2, 3) == 5"}
	var seqs []scorer.Sequence
	for i, txt := range texts {
		toks := s.Tokenize(txt)
		require.Greater(t, len(toks), 2)
		pos := []int{1, len(toks) - 1}
		if i%2 == 1 {
			pos = []int{len(toks) - 1}
		}
		seqs = append(seqs, scorer.Sequence{Tokens: toks, Positions: pos})
	}
	req := scorer.Request{K: 5, Sequences: seqs}
	whole, err := s.Client(fastRetry...).Score(bg, req)
	require.NoError(t, err)
	require.Equal(t, 1, s.RequestCount("/v1/completions"))

	split, err := s.Client(append([]vllm.Option{vllm.WithScoreBatch(2, 1000, 3)}, fastRetry...)...).Score(bg, req)
	require.NoError(t, err)
	require.Equal(t, 1+4, s.RequestCount("/v1/completions"), "7 sequences, 2 per request")
	if d := cmp.Diff(whole, split); d != "" {
		t.Errorf("one request vs split (-want +got):\n%s", d)
	}
	for i, r := range split.Sequences {
		require.Equal(t, seqs[i].Positions, r.Positions)
	}
}
