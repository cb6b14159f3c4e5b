// Package scorertest checks that a [scorer.LogprobScorer] keeps the contract that
// package opd relies on. It is for authors of their own teachers (another inference
// engine, a local model):
//
//	func TestMyTeacher(t *testing.T) {
//		scorertest.Run(t, func() scorer.LogprobScorer { return myteacher.New(url) })
//	}
//
// The checks, each a subtest of [Run] and a part of [TestScorer]'s error:
//   - CancelledContext: a call with an already cancelled context returns an error that
//     is (errors.Is) context.Canceled.
//   - WellFormed: the answer to [SampleRequest] passes [CheckResult].
//   - Batched: scoring two sequences in one call gives the same rows as scoring each
//     alone (a teacher must not let sequences of a batch see each other).
//   - Concurrent: the same call from several goroutines at once gives the same answer
//     (run the test with -race to catch data races).
//   - RejectsPositionZero: a request for position 0 (which has no context) is an error.
package scorertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/agentic-opd/agenticopd/scorer"
)

// Concurrency is the number of goroutines of the Concurrent check.
const Concurrency = 4

// SampleRequest is the request the checks send: two short sequences, K = 5. Token
// ids are below 200, so any real vocabulary has them.
func SampleRequest() scorer.Request {
	return scorer.Request{K: 5, Sequences: []scorer.Sequence{
		{Tokens: []int32{10, 11, 12, 13, 14, 15, 16, 17}, Positions: []int{1, 4, 5, 7}},
		{Tokens: []int32{100, 101, 102, 103, 104}, Positions: []int{2, 3}},
	}}
}

type check struct {
	name string
	run  func(s scorer.LogprobScorer) error
}

var checks = []check{
	{"CancelledContext", checkCancelled},
	{"WellFormed", checkWellFormed},
	{"Batched", checkBatched},
	{"Concurrent", checkConcurrent},
	{"RejectsPositionZero", checkPositionZero},
}

// Run runs every check as a subtest of t, each on a scorer made by newScorer.
func Run(t *testing.T, newScorer func() scorer.LogprobScorer) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(newScorer()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestScorer runs every check on s and returns every violation found, joined with
// errors.Join, or nil.
func TestScorer(s scorer.LogprobScorer) error {
	var errs []error
	for _, c := range checks {
		if err := c.run(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// CheckResult reports whether res is a well-formed answer to req: the shape of
// [scorer.Result.Validate], exactly K entries per position (the checks use a K far
// below any vocabulary size), logprobs finite and at most 0, sorted from most to least
// likely, no id twice in a row, and the token's own logprob no greater than the top
// entry's.
func CheckResult(req scorer.Request, res scorer.Result) error {
	if err := res.Validate(req); err != nil {
		return err
	}
	var errs []error
	for s := range res.Sequences {
		sr := &res.Sequences[s]
		for i, p := range sr.Positions {
			ids, lps := sr.Top(i)
			if len(ids) != req.K {
				errs = append(errs, fmt.Errorf("sequence %d position %d: %d entries, want %d", s, p, len(ids), req.K))
				continue
			}
			seen := map[int32]bool{}
			for j, lp := range lps {
				if !finiteLogprob(lp) {
					errs = append(errs, fmt.Errorf("sequence %d position %d: entry %d has logprob %v", s, p, j, lp))
				}
				if j > 0 && lp > lps[j-1] {
					errs = append(errs, fmt.Errorf("sequence %d position %d: entries not sorted by rank at %d", s, p, j))
				}
				if seen[ids[j]] {
					errs = append(errs, fmt.Errorf("sequence %d position %d: id %d twice", s, p, ids[j]))
				}
				seen[ids[j]] = true
			}
			tok := sr.TokenLogprobs[i]
			if !finiteLogprob(tok) || tok > lps[0] {
				errs = append(errs, fmt.Errorf("sequence %d position %d: token logprob %v (top entry %v)", s, p, tok, lps[0]))
			}
		}
	}
	return errors.Join(errs...)
}

func finiteLogprob(lp float32) bool {
	return !math.IsNaN(float64(lp)) && !math.IsInf(float64(lp), 0) && lp <= 0
}

func checkCancelled(s scorer.LogprobScorer) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Score(ctx, SampleRequest())
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("LogprobScorer.Score with a cancelled context returned %v, want context.Canceled", err)
	}
	return nil
}

func checkWellFormed(s scorer.LogprobScorer) error {
	req := SampleRequest()
	res, err := s.Score(context.Background(), req)
	if err != nil {
		return fmt.Errorf("LogprobScorer.Score: %w", err)
	}
	return CheckResult(req, res)
}

func checkBatched(s scorer.LogprobScorer) error {
	req := SampleRequest()
	both, err := s.Score(context.Background(), req)
	if err != nil {
		return fmt.Errorf("LogprobScorer.Score: %w", err)
	}
	for i, seq := range req.Sequences {
		alone, err := s.Score(context.Background(), scorer.Request{K: req.K, Sequences: []scorer.Sequence{seq}})
		if err != nil {
			return fmt.Errorf("LogprobScorer.Score of sequence %d alone: %w", i, err)
		}
		if len(alone.Sequences) != 1 || len(both.Sequences) <= i {
			return fmt.Errorf("sequence %d: wrong number of results", i)
		}
		if !sameTopIDs(both.Sequences[i], alone.Sequences[0]) {
			return fmt.Errorf("sequence %d: its rows differ when scored in a batch", i)
		}
	}
	return nil
}

// sameTopIDs compares the ranked ids; logprobs may differ in the last bits between a
// batched and an unbatched forward pass on real hardware.
func sameTopIDs(a, b scorer.SequenceResult) bool {
	return reflect.DeepEqual(a.Positions, b.Positions) && reflect.DeepEqual(a.Offsets, b.Offsets) && reflect.DeepEqual(a.TopIDs, b.TopIDs)
}

func checkConcurrent(s scorer.LogprobScorer) error {
	req := SampleRequest()
	results := make([]scorer.Result, Concurrency)
	errs := make([]error, Concurrency)
	var wg sync.WaitGroup
	for i := range Concurrency {
		wg.Go(func() { results[i], errs[i] = s.Score(context.Background(), req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := 1; i < Concurrency; i++ {
		for j := range results[0].Sequences {
			if !sameTopIDs(results[0].Sequences[j], results[i].Sequences[j]) {
				return fmt.Errorf("concurrent call %d gave other rows for sequence %d", i, j)
			}
		}
	}
	return nil
}

func checkPositionZero(s scorer.LogprobScorer) error {
	req := SampleRequest()
	req.Sequences[0].Positions = []int{0, 1}
	if _, err := s.Score(context.Background(), req); err == nil {
		return errors.New("LogprobScorer.Score accepted position 0, which has no context to predict from")
	}
	return nil
}
