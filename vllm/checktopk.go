package vllm

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentic-opd/agenticopd/scorer"
)

// CheckTopK asks teacher for k prompt logprobs at one position of a two-token
// sequence (ids 0 and 0, which every vocabulary has): the cheapest request that asks
// for k. A program calls it once at start-up, so that a teacher server started with a
// --max-logprobs below its top-K stops it before any rollout, instead of failing the
// first group that reaches the teacher.
//
// It returns nil when the server allows k. When it does not, the error wraps
// [ErrMaxLogprobs] (errors.As gives the *[MaxLogprobsError] with the server's cap)
// and says both ways out: start the server with --max-logprobs k or more, or lower
// the top-K. Other failures (the server down, k below 1) are returned as Score
// returns them, wrapped with what was checked. teacher is usually a [*Client] or a
// [*Pool]; CheckTopK makes one request and leaves no state behind.
func CheckTopK(ctx context.Context, teacher scorer.LogprobScorer, k int) error {
	_, err := teacher.Score(ctx, scorer.Request{K: k, Sequences: []scorer.Sequence{{Tokens: []int32{0, 0}, Positions: []int{1}}}})
	var me *MaxLogprobsError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me):
		return &topKError{k: k, max: me.Max, err: err}
	default:
		return fmt.Errorf("vllm: checking a top-K of %d against the teacher: %w", k, err)
	}
}

// topKError is CheckTopK's error for a server whose cap is below k.
type topKError struct {
	k, max int
	err    error
}

func (e *topKError) Error() string {
	return fmt.Sprintf("vllm: a top-K of %d is more than the teacher server's --max-logprobs %d: start it with --max-logprobs %d or more, or lower the top-K to at most %d",
		e.k, e.max, e.k, e.max)
}

func (e *topKError) Unwrap() error { return e.err }
