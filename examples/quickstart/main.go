// Command quickstart collects OPD groups on the built-in coding tasks and writes them
// as Atropos JSON Lines.
//
// With no flags it runs offline: it starts vllmtest, the in-process vLLM simulator (a
// test and demo backend, not a language model), with a scripted student that
// sometimes writes a wrong solution first and fixes it after the tests fail, and a
// scripted judge; and a second simulator as a frozen teacher, whose model shifts
// after a hint's marker (vllmtest.WithFrozenTeacher), so that the teacher differs from
// the student where a hint applies and the inspector's heat map shows it. Everything
// else is real: the bubblewrap sandbox, the Python tests, the reward, the judge
// parsing, the teacher's top-K rows over HTTP.
//
// Per rollout it prints the teacher figures the inspector's table shows
// (report.Sequence.Figures): scored positions, those whose sampled token is outside
// the teacher's top-K, and the mean teacher-minus-student logprob over the others.
//
// With -vllm-url the same program runs against a real vLLM server (started with
// --max-logprobs at least -topk).
//
// Same -seed, same output: the task order, the split and each rollout's sampling seed
// (agenticopd.Config.SeedSampling) come from -seed, and Env.Process writes the groups
// in the order their tasks were drawn, each group's rollouts in order. Two offline
// runs with the same -seed write the same bytes to groups.jsonl and report.html and
// print the same groups and metrics. What differs, legitimately: the first line (the
// simulators' loopback URLs, whose ports the kernel picks) and the -out paths
// printed. Without bubblewrap (UNCONFINED) the commands run in a temporary directory
// of the host, whose path shows in the tests' tracebacks, so tool results and the
// groups differ between runs. With -vllm-url the requests carry the seeds too, but
// what a seed samples on vLLM can change with its batching.
//
// Logs (log/slog, JSON with -log-json) go to stdout with the groups, as serve's do: a
// group that failed and why, a judge or a teacher request that failed. When the run fails (a server that died, SIGINT), report.html is
// closed and says at its top that the run failed and why; groups.jsonl keeps the
// groups written before, and is removed when there is none; the error says which.
//
//	go run ./examples/quickstart -out opd-out -groups 2
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("quickstart", run) }

// The offline frozen teacher: the simulator's model with another seed after a hint.
const (
	frozenModel = "vllmtest-frozen-teacher-sim"
	frozenSeed  = 2
)

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("quickstart", "collects OPD groups of coding rollouts and writes them as Atropos JSON Lines with an HTML inspector page; offline on a simulator by default", stdout)
	out := fs.String("out", "opd-out", cli.Usage("out", "groups.jsonl, report.html"))
	groups := fs.Int("groups", 2, cli.Usage("groups"))
	groupSize := fs.Int("group-size", 4, cli.Usage("group-size"))
	vllmURL := fs.String("vllm-url", "", cli.Usage("vllm-url", "default: the in-process simulator"))
	model := fs.String("model", "", cli.Usage("model"))
	teacherURL := fs.String("teacher-url", "", cli.Usage("teacher-url", "default: the policy; offline, a frozen teacher simulator"))
	judgeURL := fs.String("judge-url", "", cli.Usage("judge-url", "default: the policy"))
	topK := fs.Int("topk", cli.DefaultTopK, cli.Usage("topk"))
	seed := fs.Uint64("seed", 1, cli.Usage("seed"))
	tf := cli.AddTaskFlags(fs, "builtin")
	evalSize := fs.Int("eval-size", tasks.DefaultEvalSize, cli.Usage("eval-size"))
	logJSON := fs.Bool("log-json", false, cli.Usage("log-json"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	stdout = cli.Locked(stdout) // the logs and the groups' lines share it
	log := cli.Logger(stdout, *logJSON)
	if err := errors.Join(cli.AtLeast("groups", *groups, 1), cli.AtLeast("group-size", *groupSize, 1), cli.AtLeast("topk", *topK, 1),
		cli.AtLeast("eval-size", *evalSize, 0),
		cli.URL("vllm-url", *vllmURL), cli.URL("teacher-url", *teacherURL), cli.URL("judge-url", *judgeURL)); err != nil {
		return err
	}
	dataset, err := tf.Load(ctx, log)
	if err != nil {
		return err
	}
	train, eval := tasks.BuiltinSplit(*seed)
	if dataset != nil {
		if train, eval, err = cli.SplitTasks(dataset, *evalSize, *seed); err != nil {
			return fmt.Errorf("-tasks %s: %w", tf.Spec, err)
		}
	}
	// python3 first: without it nothing can be verified.
	if _, err := os.Stat(cli.Python); err != nil {
		_, err = cli.Sandbox(ctx, true, stdout)
		return err
	}

	var opts []vllm.Option
	if *model != "" {
		opts = append(opts, vllm.WithModel(*model))
	}
	policyURL, frozenURL := *vllmURL, ""
	if policyURL == "" {
		sim, err := scripted.Start(*topK)
		if err != nil {
			return err
		}
		defer sim.Close()
		policyURL = sim.URL
		roles, teacherNote := "the policy and the judge", ""
		if *judgeURL != "" {
			roles = "the policy"
		}
		if *teacherURL == "" {
			teacher, err := vllmtest.Start(vllmtest.WithModel(frozenModel), vllmtest.WithMaxLogprobs(*topK),
				vllmtest.WithFrozenTeacher(opd.HintMarker, frozenSeed))
			if err != nil {
				return err
			}
			defer teacher.Close()
			frozenURL = teacher.URL
			teacherNote = fmt.Sprintf("; a second vllmtest at %s plays a frozen teacher (a simulator too: its model shifts after a hint's marker)", teacher.URL)
		}
		fmt.Fprintf(stdout, "%s%s; %d training tasks\n", scripted.Banner(sim, roles), teacherNote, len(train))
	} else {
		fmt.Fprintf(stdout, "vLLM server: %s\n", policyURL)
	}
	// The simulator runs only its own scripted commands, so they may run unconfined
	// when bubblewrap is missing; a real model's code never does.
	var sandboxes *bwrap.Factory
	if cli.HasRepo(dataset) {
		sandboxes, err = cli.ImageSandbox(ctx, tf.ImageCache, log)
	} else {
		sandboxes, err = cli.Sandbox(ctx, *vllmURL == "" && dataset == nil, stdout)
	}
	if err != nil {
		return err
	}

	policy, err := vllm.NewClient(policyURL, opts...)
	if err != nil {
		return err
	}
	cfg := agenticopd.Config{
		Policy:      policy,
		GroupSize:   *groupSize,
		DistillTopK: *topK,
		Seed:        *seed,
		Logger:      log,
		// Each rollout's requests carry a seed derived from -seed: with the simulator
		// two runs with the same -seed write the same groups.jsonl and report.html.
		SeedSampling: true,

		SandboxFactory: sandboxes,
	}
	if dataset != nil {
		if cfg.Tasks, err = tasks.NewCycle(train, *seed); err != nil {
			return err
		}
		cfg.EvalTasks = eval
	}
	teacher := policy
	switch {
	case *teacherURL != "":
		if teacher, err = vllm.NewClient(*teacherURL, opts...); err != nil {
			return err
		}
		cfg.Teacher = teacher
	case frozenURL != "":
		if teacher, err = vllm.NewClient(frozenURL, vllm.WithModel(frozenModel)); err != nil {
			return err
		}
		cfg.Teacher = teacher
	}
	// Before any rollout: a teacher that cannot give -topk logprobs fails every hint.
	if err := cli.CheckTopK(ctx, teacher, "topk", *topK); err != nil {
		return err
	}
	if *judgeURL != "" {
		if cfg.JudgeModel, err = vllm.NewClient(*judgeURL, opts...); err != nil {
			return err
		}
	}
	// On a terminal, stderr shows groups done and sandboxes open (not on stdout's own
	// terminal, where the bar would share lines with the groups printed).
	progress := cli.NewProgress(cli.ProgressWriter(stdout, os.Stderr), sandboxes, *groups)
	defer progress.Close()
	cfg.SandboxFactory = progress
	cfg.OnGroup = func(g *agenticopd.Group) {
		progress.GroupDone()
		printGroup(stdout, g)
	}
	cfg.ReportPath = filepath.Join(*out, "report.html")
	env, err := agenticopd.NewEnv(cfg)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(*out, "groups.jsonl")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = env.Process(ctx, *groups, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	progress.Close()
	if err != nil {
		return failed(err, path, cfg.ReportPath, progress.Groups(), *groups)
	}

	fmt.Fprintf(stdout, "\nwrote %d groups to %s\nand the HTML inspector to %s (open it in a browser)\n\nmetrics:\n", *groups, path, cfg.ReportPath)
	cli.PrintMetrics(stdout, env.Metrics(), 40)
	return nil
}

// failed is the error of a run that failed with err after written of n groups: it
// says what is left on disk. groups.jsonl without a group is removed; report.html was
// closed by Process, saying that the run failed and why.
func failed(err error, groups, page string, written, n int) error {
	says := ""
	if _, serr := os.Stat(page); serr == nil {
		says = "; " + page + " says the run failed, and why"
	}
	if written > 0 {
		return fmt.Errorf("%w\n%d of %d groups were written to %s%s", err, written, n, groups, says)
	}
	if rerr := os.Remove(groups); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return errors.Join(err, fmt.Errorf("no group was written, and the empty %s could not be removed: %w", groups, rerr))
	}
	return fmt.Errorf("%w\nno group was written (the empty %s was removed)%s", err, groups, says)
}

func printGroup(w io.Writer, g *agenticopd.Group) {
	fmt.Fprintf(w, "\ngroup: task %s\n", g.Task.ID)
	page := g.Report()
	for i, r := range g.Rollouts {
		t := r.Trajectory
		scored := 0
		var hints []string
		if i < len(g.OPD.Sequences) {
			seq := &g.OPD.Sequences[i]
			for _, tr := range seq.Turns {
				if tr.Status == opd.StatusScored {
					scored++
				}
			}
			hints = seq.Hints()
		}
		fmt.Fprintf(w, "  rollout %d: score %.3f (C %.1f E %.1f U %.1f) turns %d, %d tokens, stop %s, %d hints, %d scored turns%s\n",
			i, r.Reward.Reward, r.Reward.Correctness, r.Reward.Efficiency, r.Reward.ToolUsage,
			t.TurnsUsed, len(t.Tokens), t.Stop, len(hints), scored, figures(page, i))
		for _, h := range hints {
			if h != "" {
				fmt.Fprintf(w, "    hint: %s\n", strings.TrimSpace(h))
			}
		}
	}
	if g.Dropped != "" {
		fmt.Fprintf(w, "  dropped: %s\n", g.Dropped)
	}
}

// figures describes the teacher figures of rollout i as the inspector's table shows
// them; "" when the group has no teacher rows.
func figures(page report.Group, i int) string {
	if i >= len(page.Sequences) {
		return ""
	}
	f, err := page.Sequences[i].Figures()
	if err != nil || f.Scored == 0 {
		return ""
	}
	delta := "–"
	if f.DeltaPositions > 0 {
		delta = strconv.FormatFloat(f.MeanDelta, 'f', 3, 64)
	}
	return fmt.Sprintf(", %d scored positions (%d outside the teacher's top-K), mean Δ logprob in top-K %s", f.Scored, f.OutsideTopK, delta)
}
