// Command evaluate runs the eval split of the built-in tasks (or of a JSONL dataset)
// once each, greedily and without OPD, and writes metrics.json and samples.jsonl in
// the layout of Atropos's evaluate mode.
//
// With no flags it runs offline against the in-process vLLM simulator (vllmtest, a
// scripted test and demo backend, not a language model); with -vllm-url it evaluates
// a real server.
//
//	go run ./examples/evaluate -out eval-out
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

func main() { cli.Main("evaluate", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("evaluate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	out := fs.String("out", "eval-out", "directory for metrics.json and samples.jsonl")
	vllmURL := fs.String("vllm-url", "", "vLLM server (default: the in-process simulator)")
	model := fs.String("model", "", "served model name (default: the server's first model)")
	dataset := fs.String("dataset", "", "JSONL dataset (default: the built-in tasks)")
	seed := fs.Uint64("seed", 1, "seed of the train/eval split")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}

	cfg := agenticopd.Config{Seed: *seed, DisableOPD: true}
	if *dataset != "" {
		ts, report, err := tasks.LoadJSONL(*dataset, tasks.LoadConfig{})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dataset %s: %d tasks (%d rows without a task skipped)\n", *dataset, len(ts), report.SkippedNoTask)
		cfg.Dataset = ts
	}
	url := *vllmURL
	if url == "" {
		sim, err := scripted.Start(20)
		if err != nil {
			return err
		}
		defer sim.Close()
		url = sim.URL
		fmt.Fprintln(stdout, scripted.Banner(sim, "the policy"))
	}
	var opts []vllm.Option
	if *model != "" {
		opts = append(opts, vllm.WithModel(*model))
	}
	var err error
	if cfg.SandboxFactory, err = cli.Sandbox(ctx, *vllmURL == "", stdout); err != nil {
		return err
	}
	if cfg.Policy, err = vllm.NewClient(url, opts...); err != nil {
		return err
	}
	env, err := agenticopd.NewEnv(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "evaluating %d tasks\n", len(env.EvalTasks()))
	m, err := env.Evaluate(ctx, *out)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(stdout, "  %-24s %g\n", k, m[k])
	}
	fmt.Fprintf(stdout, "wrote %s/metrics.json and %s/samples.jsonl\n", *out, *out)
	return nil
}
