package vllm

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/scorer"
)

// Default limits of one scoring request; see [WithScoreBatch].
const (
	DefaultScoreMaxSequences   = 16    // sequences per scoring request
	DefaultScoreMaxTokens      = 16384 // prompt tokens per scoring request, all sequences together
	DefaultScoreMaxConcurrency = 4     // scoring requests in flight for one Score call
)

type scoreLimits struct {
	maxSeqs, maxTokens, concurrency int
}

var defaultScoreLimits = scoreLimits{DefaultScoreMaxSequences, DefaultScoreMaxTokens, DefaultScoreMaxConcurrency}

func (l scoreLimits) validate() error {
	if l.maxSeqs < 1 || l.maxTokens < 1 || l.concurrency < 1 {
		return fmt.Errorf("vllm: score batch limits must be ≥ 1 (sequences %d, tokens %d, concurrency %d)", l.maxSeqs, l.maxTokens, l.concurrency)
	}
	return nil
}

// WithScoreBatch bounds one /v1/completions request of [Client.Score]: at most
// maxSequences sequences and maxTokens prompt tokens in all (a single longer sequence
// still goes alone), with up to concurrency such requests in flight for one Score
// call. Larger scoring requests are split.
//
// The bound is on the answer's size too: vLLM answers K+1 entries per prompt token,
// about 1.6 KB of JSON per position at K = 50, all of it built as Python objects in
// vLLM's API process before the first byte is sent. The default 16384 keeps one answer
// near 26 MB at K = 50 (65536 did allow four times that). A sequence is sent only up
// to its last scored position (the positions after it cannot change the ones before),
// so a sequence scored only in its first turns costs only those; a single sequence
// whose last scored position is beyond the bound goes alone and its answer is as long
// as that prefix, since vLLM's prompt_logprobs have no start offset. Defaults [DefaultScoreMaxSequences],
// [DefaultScoreMaxTokens], [DefaultScoreMaxConcurrency]; values below 1 make
// NewClient fail.
func WithScoreBatch(maxSequences, maxTokens, concurrency int) Option {
	return func(cf *config) { cf.score = scoreLimits{maxSequences, maxTokens, concurrency} }
}

// Score implements [scorer.LogprobScorer]. Sequences go in /v1/completions requests
// with prompt as a list of id lists, prompt_logprobs=K, max_tokens=1, n=1,
// temperature 1, split to respect [WithScoreBatch]. For each requested position p it
// reads prompt_logprobs[p]: the top-K by rank 1…K, and the entry keyed by the token
// actually at p, whose absence is an error (it is how the alignment is checked).
//
// A K above the server's --max-logprobs fails with [ErrMaxLogprobs].
func (c *Client) Score(ctx context.Context, req scorer.Request) (scorer.Result, error) {
	return scoreSplit(ctx, req, c.score, c.scoreBatch)
}

// scoreSplit validates req, splits it into batches and runs send on each, concurrently
// within limits.
func scoreSplit(ctx context.Context, req scorer.Request, lim scoreLimits,
	send func(ctx context.Context, seqs []scorer.Sequence, k int) ([]scorer.SequenceResult, error),
) (scorer.Result, error) {
	if err := req.Validate(); err != nil {
		return scorer.Result{}, fmt.Errorf("vllm: score: %w", err)
	}
	out := scorer.Result{Sequences: make([]scorer.SequenceResult, len(req.Sequences))}
	// Sequences with no positions need no request.
	var todo []int
	for i, s := range req.Sequences {
		if len(s.Positions) == 0 {
			out.Sequences[i] = scorer.SequenceResult{Positions: []int{}, Offsets: []int32{0}, TokenLogprobs: []float32{}, TopIDs: []int32{}, TopLogprobs: []float32{}}
			continue
		}
		todo = append(todo, i)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lim.concurrency)
	for lo := 0; lo < len(todo); {
		hi, tokens := lo, 0
		for hi < len(todo) && hi-lo < lim.maxSeqs {
			n := len(scoredPrefix(req.Sequences[todo[hi]]).Tokens)
			if hi > lo && tokens+n > lim.maxTokens {
				break
			}
			tokens += n
			hi++
		}
		idx := todo[lo:hi]
		g.Go(func() error {
			seqs := make([]scorer.Sequence, len(idx))
			for i, j := range idx {
				seqs[i] = scoredPrefix(req.Sequences[j])
			}
			res, err := send(gctx, seqs, req.K)
			if err != nil {
				return err
			}
			for i, j := range idx {
				out.Sequences[j] = res[i]
			}
			return nil
		})
		lo = hi
	}
	if err := g.Wait(); err != nil {
		return scorer.Result{}, err
	}
	if err := out.Validate(req); err != nil {
		return scorer.Result{}, fmt.Errorf("vllm: score: %w", err)
	}
	return out, nil
}

// scoredPrefix cuts s after its last scored position; the results are the same, as
// the model is causal.
func scoredPrefix(s scorer.Sequence) scorer.Sequence {
	s.Tokens = s.Tokens[:s.Positions[len(s.Positions)-1]+1]
	return s
}

// scoreBatch sends one scoring request and reads its results.
func (c *Client) scoreBatch(ctx context.Context, seqs []scorer.Sequence, k int) ([]scorer.SequenceResult, error) {
	prompts := make([][]int32, len(seqs))
	for i, s := range seqs {
		prompts[i] = s.Tokens
	}
	creq := CompletionRequest{
		Prompts:        prompts,
		N:              1,
		MaxTokens:      1,
		PromptLogprobs: new(k),
	}
	creq.SetSampling(ScoreSampling())
	resp, err := c.Completions(ctx, creq)
	if err != nil {
		return nil, err
	}
	out := make([]scorer.SequenceResult, len(seqs))
	for i, s := range seqs {
		r, err := sequenceResult(resp.Choices[i].PromptLogprobs, s, k)
		if err != nil {
			return nil, fmt.Errorf("vllm: POST /v1/completions: prompt %d: %w", i, err)
		}
		out[i] = r
	}
	return out, nil
}

// sequenceResult reads the requested positions of one sequence from its
// prompt_logprobs.
func sequenceResult(pl *PromptLogprobs, s scorer.Sequence, k int) (scorer.SequenceResult, error) {
	switch {
	case pl == nil:
		return scorer.SequenceResult{}, fmt.Errorf("the answer has no prompt_logprobs (0 positions)")
	case pl.Len() < len(s.Tokens):
		return scorer.SequenceResult{}, fmt.Errorf("%w: prompt_logprobs has %d positions for a %d-token prompt", ErrShortPromptLogprobs, pl.Len(), len(s.Tokens))
	case pl.Len() > len(s.Tokens):
		return scorer.SequenceResult{}, fmt.Errorf("prompt_logprobs has %d positions, the prompt %d tokens", pl.Len(), len(s.Tokens))
	}
	r := scorer.SequenceResult{
		Positions:     append([]int(nil), s.Positions...),
		Offsets:       make([]int32, 1, len(s.Positions)+1),
		TopIDs:        make([]int32, 0, len(s.Positions)*k),
		TopLogprobs:   make([]float32, 0, len(s.Positions)*k),
		TokenLogprobs: make([]float32, len(s.Positions)),
	}
	for i, p := range s.Positions {
		lp, _, ok := pl.Lookup(p, s.Tokens[p])
		if !ok {
			return scorer.SequenceResult{}, fmt.Errorf("position %d: no entry for the prompt token %d (misaligned reply)", p, s.Tokens[p])
		}
		r.TokenLogprobs[i] = lp
		before := len(r.TopIDs)
		var err error
		if r.TopIDs, r.TopLogprobs, err = pl.AppendTopK(p, k, r.TopIDs, r.TopLogprobs); err != nil {
			return scorer.SequenceResult{}, err
		}
		if len(r.TopIDs) == before {
			return scorer.SequenceResult{}, fmt.Errorf("position %d: no ranked entries", p)
		}
		r.Offsets = append(r.Offsets, int32(len(r.TopIDs)))
	}
	return r, nil
}
