package scorer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/scorer"
)

func TestRequestValidate(t *testing.T) {
	seq := []int32{1, 2, 3, 4}
	tests := []struct {
		name string
		req  scorer.Request
		ok   bool
	}{
		{"ok", scorer.Request{K: 2, Sequences: []scorer.Sequence{{Tokens: seq, Positions: []int{1, 3}}}}, true},
		{"no positions", scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: seq}}}, true},
		{"k zero", scorer.Request{K: 0, Sequences: []scorer.Sequence{{Tokens: seq, Positions: []int{1}}}}, false},
		{"position 0", scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: seq, Positions: []int{0}}}}, false},
		{"past the end", scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: seq, Positions: []int{4}}}}, false},
		{"not ascending", scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: seq, Positions: []int{2, 2}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, scorer.ErrInvalidRequest)
		})
	}
}

func TestResultValidateAndTop(t *testing.T) {
	req := scorer.Request{K: 2, Sequences: []scorer.Sequence{{Tokens: []int32{5, 6, 7}, Positions: []int{1, 2}}}}
	good := scorer.Result{Sequences: []scorer.SequenceResult{{
		Positions:     []int{1, 2},
		Offsets:       []int32{0, 2, 3},
		TopIDs:        []int32{6, 9, 7},
		TopLogprobs:   []float32{-0.1, -2, -0.5},
		TokenLogprobs: []float32{-0.1, -0.5},
	}}}
	require.NoError(t, good.Validate(req))
	ids, lps := good.Sequences[0].Top(0)
	assert.Equal(t, []int32{6, 9}, ids)
	assert.Equal(t, []float32{-0.1, -2}, lps)

	tooMany := good
	tooMany.Sequences = []scorer.SequenceResult{good.Sequences[0]}
	tooMany.Sequences[0].Offsets = []int32{0, 3, 3}
	assert.Error(t, tooMany.Validate(req), "three entries for K=2")

	missing := scorer.Result{}
	assert.Error(t, missing.Validate(req))

	moved := scorer.Result{Sequences: []scorer.SequenceResult{good.Sequences[0]}}
	moved.Sequences[0].Positions = []int{1, 1}
	assert.Error(t, moved.Validate(req))
}

func TestFunc(t *testing.T) {
	want := errors.New("teacher down")
	var s scorer.LogprobScorer = scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
		return scorer.Result{}, want
	})
	_, err := s.Score(context.Background(), scorer.Request{K: 1})
	require.ErrorIs(t, err, want)
}
