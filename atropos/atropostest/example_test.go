package atropostest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

// The fake trajectory API with a trainer already registered and polling: an env
// client registers, sends a group, and the API has it.
func ExampleStart() {
	api, err := atropostest.Start(atropostest.WithTrainer(atropos.TrainerRegistration{BatchSize: 2, MaxTokenLen: 1024, NumSteps: 1}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer api.Close()
	api.StartTrainer()
	spool, err := os.MkdirTemp("", "spool-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(spool)
	client, err := atropos.NewClient(api.URL(), atropos.ClientConfig{EnvName: "example", GroupSize: 2, SpoolDir: spool})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	fmt.Println(client.Register(ctx))
	g := &atropos.ScoredDataGroup{}
	for _, score := range []float64{0, 1} {
		_ = g.Add(atropos.Sequence{Tokens: []int{1, 2, 3}, Masks: []int{-100, 2, 3}, Score: score})
	}
	fmt.Println(client.Send(ctx, g))
	fmt.Println(len(api.Received()), api.Received()[0].Scores)
	// Output:
	// <nil>
	// <nil>
	// 1 [0 1]
}
