package vllm_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// longSequence is n tokens of the simulator's tokenization of its own text.
func longSequence(s *vllmtest.Server, n int) []int32 {
	var out []int32
	for len(out) < n {
		out = append(out, s.Tokenize("def fizzbuzz(n):\n    return [str(i) for i in range(1, n + 1)]\nAll tests passed! ")...)
	}
	return out[:n]
}

func TestScoreSendsOnlyTheScoredPrefix(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(50))
	toks := longSequence(s, 3000)
	req := scorer.Request{K: 50, Sequences: []scorer.Sequence{{Tokens: toks, Positions: []int{5, 400, 999}}}}
	got, err := s.Client(fastRetry...).Score(bg, req)
	require.NoError(t, err)
	reqs := s.Requests()
	require.Len(t, reqs[len(reqs)-1].JSON["prompt"], 1000, "nothing after the last scored position is sent")

	// The same positions read from the whole sequence's prompt_logprobs.
	k := 50
	full, err := s.Client().Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{toks}, MaxTokens: 1, PromptLogprobs: &k})
	require.NoError(t, err)
	pl := full.Choices[0].PromptLogprobs
	require.Equal(t, len(toks), pl.Len())
	for i, p := range req.Sequences[0].Positions {
		ids, lps, err := pl.AppendTopK(p, k, nil, nil)
		require.NoError(t, err)
		gotIDs, gotLps := got.Sequences[0].Top(i)
		if d := cmp.Diff(ids, gotIDs); d != "" {
			t.Errorf("position %d ids (-whole +prefix):\n%s", p, d)
		}
		require.Equal(t, lps, gotLps)
	}
}

func TestScoreLongSequencesSplitEqualsOneRequest(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(50))
	var seqs []scorer.Sequence
	for i, n := range []int{2500, 1800, 3100, 900} {
		toks := longSequence(s, n)
		seqs = append(seqs, scorer.Sequence{Tokens: toks, Positions: []int{1 + i, n / 2, n - 1}})
	}
	req := scorer.Request{K: 50, Sequences: seqs}
	one, err := s.Client(vllm.WithScoreBatch(16, 1<<20, 1)).Score(bg, req)
	require.NoError(t, err)
	require.Equal(t, 1, s.RequestCount("/v1/completions"))
	split, err := s.Client(vllm.WithScoreBatch(16, 3200, 2)).Score(bg, req)
	require.NoError(t, err)
	require.Equal(t, 1+4, s.RequestCount("/v1/completions"), "no two of these fit 3200 prompt tokens together")
	if d := cmp.Diff(one, split); d != "" {
		t.Errorf("one request vs split (-want +got):\n%s", d)
	}
}

// sizer records the size of every response body.
type sizer struct {
	mu    sync.Mutex
	sizes []int
}

func (z *sizer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	z.sizes = append(z.sizes, len(b))
	z.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

func (z *sizer) largest() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	m := 0
	for _, n := range z.sizes {
		m = max(m, n)
	}
	return m
}

// BenchmarkScoreResponseBytes reports the largest single scoring answer, in bytes, for
// a group of two 32k-token trajectories scored at K = 50 on every eighth position up
// to the end, with the old bound (65536 prompt tokens per request) and the new default
// (16384), as the metric max-response-bytes of the sub-benchmarks 65536 and default.
func BenchmarkScoreResponseBytes(b *testing.B) {
	s, err := vllmtest.Start(vllmtest.WithMaxLogprobs(50), vllmtest.WithMaxModelLen(40000))
	require.NoError(b, err)
	defer s.Close()
	var seqs []scorer.Sequence
	for range 2 {
		toks := longSequence(s, 32768)
		var pos []int
		for p := 8; p < len(toks); p += 8 {
			pos = append(pos, p)
		}
		pos = append(pos, len(toks)-1)
		seqs = append(seqs, scorer.Sequence{Tokens: toks, Positions: pos})
	}
	req := scorer.Request{K: 50, Sequences: seqs}
	for _, tc := range []struct {
		name string
		opt  []vllm.Option
	}{
		{"65536", []vllm.Option{vllm.WithScoreBatch(16, 65536, 4)}},
		{"default", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			z := &sizer{}
			c := s.Client(append(tc.opt, vllm.WithHTTPClient(&http.Client{Transport: z}))...)
			for b.Loop() {
				_, err := c.Score(bg, req)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(z.largest()), "max-response-bytes")
		})
	}
}
