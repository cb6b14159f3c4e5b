package scorertest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/scorer/scorertest"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestVLLMClientConforms(t *testing.T) {
	sim := vllmtest.NewServer(t)
	scorertest.Run(t, func() scorer.LogprobScorer { return sim.Client() })
}

// uniform is a teacher that answers every position with ids 0..K-1, most likely first.
func uniform(ctx context.Context, req scorer.Request) (scorer.Result, error) {
	if err := ctx.Err(); err != nil {
		return scorer.Result{}, err
	}
	if err := req.Validate(); err != nil {
		return scorer.Result{}, err
	}
	var res scorer.Result
	for _, seq := range req.Sequences {
		sr := scorer.SequenceResult{Positions: seq.Positions, Offsets: []int32{0}}
		for range seq.Positions {
			for k := range req.K {
				sr.TopIDs = append(sr.TopIDs, int32(k))
				sr.TopLogprobs = append(sr.TopLogprobs, -float32(k+1))
			}
			sr.Offsets = append(sr.Offsets, int32(len(sr.TopIDs)))
			sr.TokenLogprobs = append(sr.TokenLogprobs, -float32(req.K+1))
		}
		res.Sequences = append(res.Sequences, sr)
	}
	return res, nil
}

func TestFuncConforms(t *testing.T) {
	scorertest.Run(t, func() scorer.LogprobScorer { return scorer.Func(uniform) })
}

func TestFindsBrokenScorers(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(scorer.Request, *scorer.Result) error
		want    []string
	}{
		{"ignores ctx and position 0", func(req scorer.Request, res *scorer.Result) error { return nil },
			[]string{"CancelledContext", "RejectsPositionZero"}},
		{"unsorted", func(req scorer.Request, res *scorer.Result) error {
			lps := res.Sequences[0].TopLogprobs
			lps[0], lps[1] = lps[1], lps[0]
			return nil
		}, []string{"WellFormed", "not sorted by rank"}},
		{"positive logprob", func(req scorer.Request, res *scorer.Result) error {
			if len(res.Sequences) == 2 {
				res.Sequences[1].TokenLogprobs[0] = 0.5
			}
			return nil
		}, []string{"WellFormed", "token logprob"}},
		{"batch leaks", func(req scorer.Request, res *scorer.Result) error {
			if len(req.Sequences) == 2 {
				res.Sequences[1].TopIDs[0] = 99
			}
			return nil
		}, []string{"Batched", "differ when scored in a batch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
				res, _ := uniform(context.Background(), scorer.Request{K: req.K, Sequences: positive(req.Sequences)})
				return res, tt.corrupt(req, &res)
			})
			err := scorertest.TestScorer(s)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// positive drops position 0 so the broken scorers answer without validating.
func positive(seqs []scorer.Sequence) []scorer.Sequence {
	out := make([]scorer.Sequence, len(seqs))
	for i, s := range seqs {
		out[i] = scorer.Sequence{Tokens: s.Tokens}
		for _, p := range s.Positions {
			if p > 0 {
				out[i].Positions = append(out[i].Positions, p)
			}
		}
	}
	return out
}
