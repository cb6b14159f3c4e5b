// Command minimal is the README's program: one group on the first built-in task,
// written as an Atropos JSON line. It runs anywhere bubblewrap does: the policy is the
// in-process vLLM simulator (a test and demo backend, not a language model), sampling
// freely, so expect low scores and no hints.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("minimal", run) }

// run is the README's program; it takes no flags (-h says so).
func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("minimal", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintln(w, "Usage of minimal (no flags): one group on the first built-in task, as a JSON line on stdout")
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: minimal takes no arguments", fs.Arg(0))
	}

	// For a real server: policy, err := vllm.NewClient("http://localhost:8000")
	sim, err := vllmtest.Start(vllmtest.WithMaxLogprobs(50))
	if err != nil {
		return err
	}
	defer sim.Close()

	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), KeepEqualScores: true})
	if err != nil {
		return err
	}
	g, err := env.CollectGroup(ctx, tasks.Builtin()[0])
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "task", g.Task.ID, "scores", g.Data.Scores)
	return atropos.WriteJSONL(w, g.Data)
}
