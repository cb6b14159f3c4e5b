// Command evaluate runs the eval split of the built-in tasks (or tasks of a dataset)
// once each, greedily and without OPD, and writes metrics.json and samples.jsonl in
// the layout of Atropos's evaluate mode.
//
// With -tasks (a file, hf:DATASET_ID or a Harbor directory) the dataset is an eval
// set of its own: no task is held out for training, so a dataset of any size works;
// -max-tasks tasks of it (shuffled by -seed; 0: all) are evaluated. Repository tasks
// (SWE-bench, SWE-smith, Harbor; see -tasks-format) run in sandboxes of their images,
// pulled into -image-cache. A file without any task, or without any task that has
// tests, is an error that names it.
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
	fs := cli.NewFlagSet("evaluate", "evaluates a policy on tasks once each, greedily, and writes metrics.json and samples.jsonl as Atropos's evaluate mode does", stdout)
	out := fs.String("out", "eval-out", cli.Usage("out", "metrics.json, samples.jsonl"))
	vllmURL := fs.String("vllm-url", "", cli.Usage("vllm-url", "default: the in-process simulator"))
	model := fs.String("model", "", cli.Usage("model"))
	tf := cli.AddTaskFlags(fs, "builtin")
	maxTasks := fs.Int("max-tasks", tasks.DefaultEvalSize, cli.Usage("max-tasks"))
	seed := fs.Uint64("seed", 1, cli.Usage("seed"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.URL("vllm-url", *vllmURL), cli.AtLeast("max-tasks", *maxTasks, 0)); err != nil {
		return err
	}

	cfg := agenticopd.Config{Seed: *seed, DisableOPD: true}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	cfg.Logger = log
	ts, err := tf.Load(ctx, log)
	if err != nil {
		return err
	}
	if ts != nil {
		// The whole dataset is for evaluation: no train split, so no size is too small.
		eval, _, err := tasks.Split(ts, tasks.SplitConfig{Seed: *seed, EvalSize: tasks.NoEval})
		if err != nil {
			return err
		}
		if *maxTasks > 0 {
			eval = eval[:min(*maxTasks, len(eval))]
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
	if cli.HasRepo(cfg.EvalTasks) {
		cfg.SandboxFactory, err = cli.ImageSandbox(ctx, tf.ImageCache, log)
	} else {
		cfg.SandboxFactory, err = cli.SandboxLogged(ctx, *vllmURL == "", stdout, log)
	}
	if err != nil {
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
