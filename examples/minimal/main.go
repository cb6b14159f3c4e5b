// Command minimal is the README's program, line for line: one group on the first
// built-in task, written to stdout as an Atropos JSON line. It runs anywhere
// bubblewrap does: the policy is the in-process vLLM simulator (a test and demo
// backend, not a language model), sampling freely, so expect low scores and no hints.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() {
	flag.Parse()                                             // no flags of its own: -h prints the usage
	sim, err := vllmtest.Start(vllmtest.WithMaxLogprobs(50)) // or vllm.NewClient("http://localhost:8000")
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), KeepEqualScores: true})
	if err != nil {
		log.Fatal(err)
	}
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0]) // 4 rollouts, judged, scored
	if err != nil {
		log.Fatal(err)
	}
	if err := atropos.WriteJSONL(os.Stdout, g.Data); err != nil { // one ScoredDataGroup per line
		log.Fatal(err)
	}
}
