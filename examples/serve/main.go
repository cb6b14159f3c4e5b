// Command serve is the env process an operator runs against a real Atropos
// trajectory API and real vLLM servers: it registers, keeps as many groups in flight
// as the API's back-pressure allows, and sends every group through a durable spool
// (a group accepted is on disk until the API has it).
//
//	go run ./examples/serve -atropos-url http://localhost:8000 -spool /var/lib/opd-spool \
//	    -vllm-url http://localhost:9001 -tasks tasks.jsonl -metrics-addr :9100 -log-json
//
// Logs are structured (log/slog; JSON with -log-json) and go to stdout: a start-up
// line with the configuration and the sandbox's enforcement, registration (env id,
// trainer batch size), a line while it waits to register (with how long), spool
// replays, resets, one line per group, and a "shut down" line. The metrics are logged
// every -metrics-every groups and, with -metrics-addr, served for Prometheus at
// /metrics (see agenticopd.Env.Collector). When stderr is a terminal and stdout is not
// (logs to a file, a pipe or a journal), stderr shows a progress bar: groups done and
// sandboxes open; when both are the same terminal the bar is off, so that it never
// shares a line with a log record.
//
// It runs until SIGINT or SIGTERM (a clean shut down: exit code 0), until -groups
// groups were sent, or until the API's trainer has all its steps. -topk is checked
// against the teacher server's --max-logprobs before any rollout. -tasks with a file
// that holds no task, or no task with tests, is an error; -eval-size sets how many
// tasks are held out for evaluation (0: none, for small datasets).
//
// With no -atropos-url it runs offline: the in-process vLLM simulator (vllmtest, a
// scripted test and demo backend, not a language model) plays the policy, judge and
// teacher unless -vllm-url is given, the in-process fake trajectory API (atropostest)
// plays run-api, and a small trainer in this process registers and pulls batches
// until -steps are done.
//
//	go run ./examples/serve -steps 3
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

func main() { cli.Main("serve", run) }

type options struct {
	atroposURL, spool                         string
	tasks                                     *cli.TaskFlags
	vllmURL, model, teacherURL, judgeURL      string
	envName                                   string
	weight                                    float64
	groups, groupSize, topK, batchSize, steps int
	evalSize, maxDropped                      int
	metricsEvery                              int
	metricsAddr                               string
	logJSON                                   bool
	seed                                      uint64
}

func parse(args []string, stdout io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("serve", "the env process: collects groups of rollouts with OPD rows and sends them to an Atropos trajectory API through a durable spool", stdout)
	fs.StringVar(&o.atroposURL, "atropos-url", "", cli.Usage("atropos-url", "default: an in-process fake with an in-process trainer"))
	fs.StringVar(&o.spool, "spool", "", cli.Usage("spool", "required with -atropos-url; default offline: a temporary directory"))
	fs.IntVar(&o.groups, "groups", 0, cli.Usage("groups", "stop after this many were sent; 0: until interrupted or the trainer is done"))
	o.tasks = cli.AddTaskFlags(fs, "builtin")
	fs.IntVar(&o.evalSize, "eval-size", tasks.DefaultEvalSize, cli.Usage("eval-size"))
	fs.StringVar(&o.envName, "env-name", "agentic_opd", cli.Usage("env-name"))
	fs.Float64Var(&o.weight, "weight", 1, cli.Usage("weight"))
	fs.IntVar(&o.maxDropped, "max-dropped", agenticopd.DefaultMaxDroppedInARow, cli.Usage("max-dropped"))
	fs.StringVar(&o.vllmURL, "vllm-url", "", cli.Usage("vllm-url", "default offline: the in-process simulator"))
	fs.StringVar(&o.model, "model", "", cli.Usage("model"))
	fs.StringVar(&o.teacherURL, "teacher-url", "", cli.Usage("teacher-url", "default: the policy"))
	fs.StringVar(&o.judgeURL, "judge-url", "", cli.Usage("judge-url", "default: the policy"))
	fs.IntVar(&o.groupSize, "group-size", 4, cli.Usage("group-size", "a power of two"))
	fs.IntVar(&o.topK, "topk", cli.DefaultTopK, cli.Usage("topk"))
	fs.Uint64Var(&o.seed, "seed", 1, cli.Usage("seed"))
	fs.IntVar(&o.metricsEvery, "metrics-every", 10, cli.Usage("metrics-every"))
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", cli.Usage("metrics-addr"))
	fs.BoolVar(&o.logJSON, "log-json", false, cli.Usage("log-json"))
	fs.IntVar(&o.batchSize, "batch-size", 8, cli.Usage("batch-size", "offline"))
	fs.IntVar(&o.steps, "steps", 2, cli.Usage("steps", "offline"))
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	err := errors.Join(cli.AtLeast("groups", o.groups, 0), cli.AtLeast("group-size", o.groupSize, 1),
		cli.AtLeast("topk", o.topK, 1), cli.AtLeast("metrics-every", o.metricsEvery, 0), cli.AtLeast("eval-size", o.evalSize, 0),
		cli.URL("atropos-url", o.atroposURL), cli.URL("vllm-url", o.vllmURL), cli.URL("teacher-url", o.teacherURL), cli.URL("judge-url", o.judgeURL))
	if !(o.weight > 0) || math.IsInf(o.weight, 0) {
		err = errors.Join(err, &cli.FlagError{Flag: "weight", Value: o.weight, Reason: "a positive number"})
	}
	if o.envName == "" {
		err = errors.Join(err, &cli.FlagError{Flag: "env-name", Value: `""`, Reason: "a name"})
	}
	if o.maxDropped == 0 {
		err = errors.Join(err, &cli.FlagError{Flag: "max-dropped", Value: 0, Reason: "at least 1 (negative: never stop)"})
	}
	if o.atroposURL == "" {
		err = errors.Join(err, cli.AtLeast("steps", o.steps, 1), cli.AtLeast("batch-size", o.batchSize, o.groupSize))
	} else if o.spool == "" {
		err = errors.Join(err, &cli.FlagError{Flag: "spool", Value: `""`, Reason: "a directory with -atropos-url: accepted groups wait there until the API has them"})
	}
	if o.groupSize&(o.groupSize-1) != 0 {
		err = errors.Join(err, &cli.FlagError{Flag: "group-size", Value: o.groupSize, Reason: "a power of two (Atropos batches)"})
	}
	if o.metricsAddr != "" {
		if _, _, e := net.SplitHostPort(o.metricsAddr); e != nil {
			err = errors.Join(err, &cli.FlagError{Flag: "metrics-addr", Value: o.metricsAddr, Reason: "HOST:PORT"})
		}
	}
	return o, err
}

// run parses args and serves. Ended by ctx (SIGINT, SIGTERM) it shuts down cleanly:
// a "shut down" line and a nil error, so the program exits 0.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parse(args, stdout)
	if err != nil {
		return err
	}
	var handler slog.Handler = slog.NewTextHandler(stdout, nil)
	if o.logJSON {
		handler = slog.NewJSONHandler(stdout, nil)
	}
	log := slog.New(handler)
	why, err := serve(ctx, o, stdout, log)
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
		log.Info("shut down", "reason", "interrupted (SIGINT or SIGTERM)")
		return nil
	case err != nil:
		return err // printed once, by cli.Main
	}
	log.Info("shut down", "reason", why)
	return nil
}

// serve runs the env until ctx ends or it is done; why says what ended it.
func serve(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) (why string, err error) {
	cfg := agenticopd.Config{GroupSize: o.groupSize, DistillTopK: o.topK, Seed: o.seed, Logger: log, MaxDroppedInARow: o.maxDropped}
	dataset, err := o.tasks.Load(ctx, log)
	if err != nil {
		return "", err
	}
	if dataset != nil {
		train, eval, err := cli.SplitTasks(dataset, o.evalSize, o.seed)
		if err != nil {
			return "", fmt.Errorf("-tasks %s: %w", o.tasks.Spec, err)
		}
		if cfg.Tasks, err = tasks.NewCycle(train, o.seed); err != nil {
			return "", err
		}
		cfg.EvalTasks = eval
	}

	policyURL := o.vllmURL
	if policyURL == "" {
		sim, err := scripted.Start(o.topK)
		if err != nil {
			return "", err
		}
		defer sim.Close()
		policyURL = sim.URL
		log.Info(scripted.Banner(sim, "the policy, the judge and the teacher"))
	}
	var sandboxes *bwrap.Factory
	if cli.HasRepo(dataset) {
		sandboxes, err = cli.ImageSandbox(ctx, o.tasks.ImageCache, log)
	} else {
		sandboxes, err = cli.SandboxLogged(ctx, o.vllmURL == "" && o.tasks.Spec == "builtin", stdout, log)
	}
	if err != nil {
		return "", err
	}
	var vopts []vllm.Option
	if o.model != "" {
		vopts = append(vopts, vllm.WithModel(o.model))
	}
	policy, err := vllm.NewClient(policyURL, vopts...)
	if err != nil {
		return "", err
	}
	cfg.Policy = policy
	teacher := policy
	if o.teacherURL != "" {
		if teacher, err = vllm.NewClient(o.teacherURL, vopts...); err != nil {
			return "", err
		}
		cfg.Teacher = teacher
	}
	if o.judgeURL != "" {
		if cfg.JudgeModel, err = vllm.NewClient(o.judgeURL, vopts...); err != nil {
			return "", err
		}
	}
	// Before any rollout: a teacher that cannot give -topk logprobs would fail every
	// hinted group.
	if err := cli.CheckTopK(ctx, teacher, "topk", o.topK); err != nil {
		return "", err
	}

	apiURL := o.atroposURL
	trainerDone := make(chan error, 1)
	if apiURL == "" {
		api, err := atropostest.Start()
		if err != nil {
			return "", err
		}
		defer api.Close()
		apiURL = api.URL()
		log.Info("FAKE API: atropostest with an in-process trainer", "url", apiURL, "steps", o.steps, "batch_size", o.batchSize)
		// The trainer goroutine ends before serve returns: cancelled, then waited for.
		tctx, cancel := context.WithCancel(ctx)
		var trainer sync.WaitGroup
		trainer.Go(func() { trainerDone <- train(tctx, apiURL, o.batchSize, o.steps, log) })
		defer trainer.Wait()
		defer cancel()
	}
	spool := o.spool
	if spool == "" {
		dir, err := os.MkdirTemp("", "agenticopd-spool-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		spool = dir
	}
	sends := newSendTimer(nil)
	client, err := atropos.NewClient(apiURL, atropos.ClientConfig{
		EnvName: o.envName, Weight: o.weight, GroupSize: o.groupSize, SpoolDir: spool,
		Logger: log, HTTPClient: &http.Client{Transport: sends},
	})
	if err != nil {
		return "", err
	}

	progress := cli.NewProgress(cli.ProgressWriter(stdout, os.Stderr), sandboxes, o.groups)
	defer progress.Close()
	cfg.SandboxFactory = progress

	// -groups N: Serve's ctx ends once N groups were kept (sent, or spooled); groups still in flight are
	// abandoned (never sent, so nothing accepted is lost).
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	var env *agenticopd.Env
	sent := 0
	cfg.OnGroup = func(g *agenticopd.Group) {
		progress.GroupDone()
		logGroup(log, g)
		if g.Dropped == "" {
			sent++ // handed to the client: sent, or in the spool until the API has it
		}
		if o.metricsEvery > 0 && progress.Groups()%o.metricsEvery == 0 {
			logMetrics(log, env.Metrics())
		}
		if o.groups > 0 && sent >= o.groups {
			stopServe()
		}
	}
	if env, err = agenticopd.NewEnv(cfg); err != nil {
		return "", err
	}

	if o.metricsAddr != "" {
		stop, err := serveMetrics(o.metricsAddr, metricsRegistry(env, progress, client, sends), log)
		if err != nil {
			return "", err
		}
		defer stop()
	}

	log.Info("starting", append([]any{
		"atropos_url", apiURL, "policy_url", policyURL, "teacher_url", teacher.BaseURL(), "judge_url", or(o.judgeURL, policyURL),
		"env_name", o.envName, "weight", o.weight, "group_size", o.groupSize, "topk", o.topK,
		"tasks", o.tasks.Spec, "train_tasks", taskCount(cfg.Tasks), "eval_tasks", len(env.EvalTasks()), "spool", spool,
	}, cli.EnforcementAttrs(sandboxes)...)...)
	stopWaiting := logWaiting(sctx, client, apiURL, log)
	err = env.Serve(sctx, client)
	stopWaiting()
	progress.Close()
	logMetrics(log, env.Metrics())
	switch {
	case err != nil && ctx.Err() == nil && sctx.Err() != nil && errors.Is(err, context.Canceled):
		return fmt.Sprintf("the %d groups asked for were sent", o.groups), nil
	case err != nil:
		return "", err
	}
	why = "the trainer has every step it asked for"
	if o.atroposURL != "" {
		return why, nil
	}
	// The stop rule counts queued batches as done, so the trainer may still be pulling.
	select {
	case err := <-trainerDone:
		return why, err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// logGroup logs one finished group at info level.
func logGroup(log *slog.Logger, g *agenticopd.Group) {
	attrs := []any{"task", g.Task.ID, "scores", cli.Figures(g.Data.Scores), "hints", g.Metrics["opd/total_hints"]}
	if g.Dropped != "" {
		log.Info("group dropped", append(attrs, "reason", g.Dropped)...)
		return
	}
	log.Info("group kept", attrs...)
}

// waitLogEvery is how often logWaiting says that the env still waits to register.
const waitLogEvery = 30 * time.Second

// logWaiting logs that the env is registering with the API at url, and then every
// waitLogEvery, with how long it has waited, until the client is registered (which
// the client logs), ctx ends, or stop is called. It returns stop, which waits for the
// goroutine to end.
func logWaiting(ctx context.Context, client *atropos.Client, url string, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	log.Info("registering with the trajectory API (it waits for a trainer to register first)", "url", url)
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(waitLogEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if client.Registration() != nil {
				return
			}
			log.Info("still waiting to register: is the trajectory API up, and has a trainer registered?",
				"url", url, "waited", time.Since(start).Round(time.Second))
		}
	}()
	return func() { cancel(); <-done }
}

// taskCount is the number of tasks in one pass of src; for the built-in tasks
// (src nil) it is their train split's, 6.
func taskCount(src tasks.Source) int {
	if c, ok := src.(*tasks.Cycle); ok {
		return c.Len()
	}
	train, _ := tasks.BuiltinSplit(0)
	return len(train)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// logMetrics logs every metric as one record.
func logMetrics(log *slog.Logger, m map[string]float64) {
	attrs := make([]slog.Attr, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		attrs = append(attrs, slog.Float64(k, cli.Figure(m[k])))
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "metrics", attrs...)
}

// serveMetrics serves reg at http://addr/metrics until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics endpoint", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// train is a stand-in trainer: it registers, then pulls batches until it has taken
// steps of them.
func train(ctx context.Context, url string, batchSize, steps int, log *slog.Logger) error {
	tr, err := atropos.NewTrainer(url)
	if err != nil {
		return err
	}
	if _, err := tr.Register(ctx, atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 32768, NumSteps: steps}); err != nil {
		return err
	}
	for done := 0; done < steps; {
		batch, err := tr.Batch(ctx)
		if err != nil {
			return err
		}
		if batch == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		done++
		rows := 0
		for _, g := range batch {
			for s := range g.Tokens {
				for p := range g.Tokens[s] {
					if ids, _ := g.DistillRow(s, p); len(ids) > 0 {
						rows++
					}
				}
			}
		}
		log.Info("trainer: step", "step", done, "sequences", atropos.Sequences(batch...), "positions_with_teacher_rows", rows)
	}
	return nil
}
