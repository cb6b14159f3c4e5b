package scorer_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/scorer"
)

// A LogprobScorer of one's own, through Func: here a teacher that puts all its mass
// on the token that was there.
func ExampleFunc() {
	teacher := scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
		if err := req.Validate(); err != nil {
			return scorer.Result{}, err
		}
		var res scorer.Result
		for _, s := range req.Sequences {
			r := scorer.SequenceResult{Positions: s.Positions, Offsets: []int32{0}}
			for _, p := range s.Positions {
				r.TopIDs = append(r.TopIDs, s.Tokens[p])
				r.TopLogprobs = append(r.TopLogprobs, 0)
				r.Offsets = append(r.Offsets, int32(len(r.TopIDs)))
				r.TokenLogprobs = append(r.TokenLogprobs, 0)
			}
			res.Sequences = append(res.Sequences, r)
		}
		return res, nil
	})
	res, err := teacher.Score(context.Background(), scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: []int32{5, 6, 7}, Positions: []int{1, 2}}}})
	fmt.Println(err)
	ids, lps := res.Sequences[0].Top(1)
	fmt.Println(ids, lps)
	_, err = teacher.Score(context.Background(), scorer.Request{K: 0})
	fmt.Println(err != nil)
	// Output:
	// <nil>
	// [7] [0]
	// true
}
