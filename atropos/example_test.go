package atropos_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

func ExampleScoredDataGroup_Add() {
	var g atropos.ScoredDataGroup
	d := atropos.NewDistillRows(3)
	_ = d.SetRow(2, []int32{42, 7}, []float32{-0.05, -3.1}) // teacher top-2 for the token at position 2
	_ = g.Add(atropos.Sequence{
		Tokens: []int{101, 9, 42}, Masks: []int{-100, -100, 42}, Score: 1,
		InferenceLogprobs: []float64{1, 1, -0.2}, Distill: d,
	})
	if err := g.Validate(atropos.ValidateOptions{MaxTokenLen: 4096}); err != nil {
		fmt.Println(err)
		return
	}
	_ = atropos.WriteJSONL(os.Stdout, &g)
	// Output:
	// {"tokens":[[101,9,42]],"masks":[[-100,-100,42]],"scores":[1],"advantages":null,"ref_logprobs":null,"messages":null,"generation_params":null,"inference_logprobs":[[1,1,-0.2]],"overrides":null,"group_overrides":null,"images":null,"env_id":null,"distill_token_ids":[[[],[],[42,7]]],"distill_logprobs":[[[],[],[-0.05,-3.1]]]}
}

func ExampleReadJSONL() {
	in := `{"tokens":[[1,2]],"masks":[[-100,2]],"scores":[0.5]}
{"tokens":[[3,4]],"masks":[[-100,4]],"scores":[1],"distill_token_ids":[[[],[4]]],"distill_logprobs":[[[],[-0.1]]]}
`
	_ = atropos.ReadJSONL(strings.NewReader(in), func(g *atropos.ScoredDataGroup) error {
		ids, lps := g.DistillRow(0, 1)
		fmt.Println(g.Tokens[0], g.Scores[0], ids, lps)
		return nil
	})
	// Output:
	// [1 2] 0.5 [] []
	// [3 4] 1 [4] [-0.1]
}

// Example shows an env and a trainer meeting at the (fake) trajectory API.
func Example() {
	api, err := atropostest.Start()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer api.Close()
	ctx := context.Background()
	spool, err := os.MkdirTemp("", "spool")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(spool)

	trainer, _ := atropos.NewTrainer(api.URL())
	_, _ = trainer.Register(ctx, atropos.TrainerRegistration{BatchSize: 4, MaxTokenLen: 1024, NumSteps: 10})
	_, _ = trainer.Batch(ctx) // the first poll lets envs register

	env, _ := atropos.NewClient(api.URL(), atropos.ClientConfig{EnvName: "demo", GroupSize: 2, SpoolDir: spool})
	if err := env.Register(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for i := range 2 {
		var g atropos.ScoredDataGroup
		for j := range 2 {
			_ = g.Add(atropos.Sequence{Tokens: []int{1, 2}, Masks: []int{-100, 2}, Score: float64(i + j),
				InferenceLogprobs: []float64{1, -0.5}})
		}
		if err := env.Send(ctx, &g); err != nil {
			fmt.Println(err)
			return
		}
	}
	batch, _ := trainer.Batch(ctx)
	st, _ := trainer.Status(ctx)
	fmt.Println(len(batch), "groups,", atropos.Sequences(batch...), "sequences, step", st.CurrentStep)
	_ = env.Disconnect(ctx)
	// Output:
	// 2 groups, 4 sequences, step 1
}
