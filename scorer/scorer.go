// Package scorer defines the teacher role of on-policy distillation: a LogprobScorer
// reads token sequences it did not generate and returns, at chosen positions, its own
// top-K next-token distribution and the log-probability of the token that is actually
// there.
//
// The vLLM implementation is [github.com/agentic-opd/agenticopd/vllm.Client]; [Func]
// adapts a plain function, for tests and for users' own teachers; package
// [github.com/agentic-opd/agenticopd/scorer/scorertest] checks that a teacher keeps the
// contract below.
//
// # Positions
//
// Position p of a sequence means "the token at index p, predicted from tokens [0, p)".
// Position 0 has no context and can never be scored; asking for it is an error.
// Positions are strictly ascending.
//
// # Result layout
//
// Results are flat so that a 16k-token sequence with K=50 costs a handful of
// allocations: for scored position i, its top entries are
// TopIDs[Offsets[i]:Offsets[i+1]] and TopLogprobs[Offsets[i]:Offsets[i+1]], sorted by
// teacher rank (most likely first). A position normally has exactly K entries; it has
// fewer only when the vocabulary is smaller than K.
package scorer

import (
	"context"
	"errors"
	"fmt"
)

// LogprobScorer scores token sequences with a teacher model.
//
// Score returns one SequenceResult per request sequence, in order. Implementations must
// be safe for concurrent use, must honour ctx, and must either score every requested
// position or return an error: a partial result is never returned without an error.
// The returned Result is the caller's: an implementation must not change its slices
// after Score returns (the opd Distiller's rows share them rather than copy them).
type LogprobScorer interface {
	// Score returns the teacher's top-K at every requested position.
	Score(ctx context.Context, req Request) (Result, error)
}

// Request asks for the teacher's top-K at chosen positions of one or more sequences.
type Request struct {
	// Sequences are the sequences to score.
	Sequences []Sequence
	// K is the number of top entries wanted per position; it must be ≥ 1.
	K int
}

// Sequence is one token sequence and the positions in it to score.
type Sequence struct {
	// Tokens are the sequence's token ids.
	Tokens []int32
	// Positions to score, strictly ascending, each in [1, len(Tokens)).
	Positions []int
}

// Result holds one SequenceResult per requested sequence, in request order.
type Result struct {
	// Sequences has one entry per requested sequence, in request order.
	Sequences []SequenceResult
}

// SequenceResult is the teacher's view of one sequence at its requested positions.
type SequenceResult struct {
	// Positions repeats the request's positions.
	Positions []int
	// Offsets has len(Positions)+1 entries; see the package doc.
	Offsets []int32
	// TopIDs and TopLogprobs are parallel and sorted by rank within each position.
	TopIDs []int32
	// TopLogprobs are the logprobs of TopIDs.
	TopLogprobs []float32
	// TokenLogprobs[i] is the teacher's logprob of Tokens[Positions[i]].
	TokenLogprobs []float32
}

// Top returns the ranked ids and logprobs of the i-th scored position.
func (r *SequenceResult) Top(i int) (ids []int32, logprobs []float32) {
	lo, hi := r.Offsets[i], r.Offsets[i+1]
	return r.TopIDs[lo:hi], r.TopLogprobs[lo:hi]
}

// Func adapts an ordinary function to a LogprobScorer.
type Func func(ctx context.Context, req Request) (Result, error)

// Score calls f(ctx, req).
func (f Func) Score(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// ErrInvalidRequest is wrapped by [Request.Validate] errors.
var ErrInvalidRequest = errors.New("scorer: invalid request")

// Validate reports whether req is well formed: K ≥ 1, and every position strictly
// ascending inside [1, len(Tokens)).
func (req Request) Validate() error {
	if req.K < 1 {
		return fmt.Errorf("%w: K is %d, want ≥ 1", ErrInvalidRequest, req.K)
	}
	for s, seq := range req.Sequences {
		prev := 0
		for i, p := range seq.Positions {
			if p < 1 || p >= len(seq.Tokens) {
				return fmt.Errorf("%w: sequence %d position %d is %d, outside [1, %d)", ErrInvalidRequest, s, i, p, len(seq.Tokens))
			}
			if i > 0 && p <= prev {
				return fmt.Errorf("%w: sequence %d positions not strictly ascending at index %d", ErrInvalidRequest, s, i)
			}
			prev = p
		}
	}
	return nil
}

// Validate reports whether r is a well-formed answer to req: one result per sequence,
// the same positions, consistent offsets, at most K entries per position.
func (r Result) Validate(req Request) error {
	if len(r.Sequences) != len(req.Sequences) {
		return fmt.Errorf("scorer: result has %d sequences, request had %d", len(r.Sequences), len(req.Sequences))
	}
	for s := range r.Sequences {
		got, want := &r.Sequences[s], req.Sequences[s]
		if len(got.Positions) != len(want.Positions) {
			return fmt.Errorf("scorer: sequence %d has %d scored positions, want %d", s, len(got.Positions), len(want.Positions))
		}
		if len(got.Offsets) != len(got.Positions)+1 || len(got.TokenLogprobs) != len(got.Positions) {
			return fmt.Errorf("scorer: sequence %d: offsets or token logprobs have the wrong length", s)
		}
		if len(got.TopIDs) != len(got.TopLogprobs) || (len(got.Offsets) > 0 && int(got.Offsets[len(got.Offsets)-1]) != len(got.TopIDs)) {
			return fmt.Errorf("scorer: sequence %d: top ids and logprobs are not parallel", s)
		}
		for i, p := range want.Positions {
			if got.Positions[i] != p {
				return fmt.Errorf("scorer: sequence %d index %d: position %d, want %d", s, i, got.Positions[i], p)
			}
			if n := got.Offsets[i+1] - got.Offsets[i]; n < 0 || int(n) > req.K {
				return fmt.Errorf("scorer: sequence %d position %d: %d entries, want at most %d", s, p, n, req.K)
			}
		}
	}
	return nil
}
