// Command evaluate runs the eval split of the built-in tasks (or tasks of a dataset)
// once each, greedily and without OPD, and writes metrics.json and samples.jsonl in
// the layout of Atropos's evaluate mode.
//
// With -tasks FILE (or hf:DATASET_ID) the dataset is an eval set of its own: no task is
// held out for training, so a dataset of any size works; -eval-size tasks of it
// (shuffled by -seed; 0: all) are evaluated. A file without any task, or without any
// task that has tests, is an error that names it.
//
// With no flags it runs offline against the in-process vLLM simulator (vllmtest, a
// scripted test and demo backend, not a language model); with -vllm-url it evaluates
// a real server.
//
//	go run ./examples/evaluate -out eval-out
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

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
	spec := fs.String("tasks", "builtin", cli.TasksUsage)
	evalSize := fs.Int("eval-size", tasks.DefaultEvalSize, "tasks of a -tasks dataset evaluated (0: all of them)")
	hfCache := fs.String("hf-cache", "", "cache directory of hf: datasets (default: the user cache directory)")
	hfToken := fs.String("hf-token", "", "Hugging Face token for private or gated hf: datasets (default: $"+cli.HFTokenEnv+")")
	seed := fs.Uint64("seed", 1, "seed of the built-in tasks' split, and of the order of a dataset's tasks")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.URL("vllm-url", *vllmURL), cli.AtLeast("eval-size", *evalSize, 0)); err != nil {
		return err
	}

	cfg := agenticopd.Config{Seed: *seed, DisableOPD: true}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	cfg.Logger = log
	ts, err := cli.LoadTasks(ctx, *spec, *hfCache, cli.HFToken(*hfToken), log)
	if err != nil {
		return err
	}
	if ts != nil {
		// The whole dataset is for evaluation: no train split, so no size is too small.
		eval, _, err := tasks.Split(ts, tasks.SplitConfig{Seed: *seed, EvalSize: tasks.NoEval})
		if err != nil {
			return err
		}
		if *evalSize > 0 {
			eval = eval[:min(*evalSize, len(eval))]
		}
		cfg.EvalTasks, cfg.EvalSize = eval, len(eval)
		if cfg.Tasks, err = tasks.NewCycle(eval, *seed); err != nil { // never used: Evaluate trains nothing
			return err
		}
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
	if cfg.SandboxFactory, err = cli.SandboxLogged(ctx, *vllmURL == "", stdout, log); err != nil {
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
	cli.PrintMetrics(stdout, m, 24)
	fmt.Fprintf(stdout, "wrote %s/metrics.json and %s/samples.jsonl\n", *out, *out)
	return nil
}
