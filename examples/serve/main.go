// Command serve is the env process an operator runs against a real Atropos
// trajectory API and real vLLM servers: it registers, keeps as many groups in flight
// as the API's back-pressure allows, and sends every group through a durable spool
// (a group accepted is on disk until the API has it).
//
//	go run ./examples/serve -atropos-url http://localhost:8000 -spool /var/lib/opd-spool \
//	    -vllm-url http://localhost:9001 -tasks tasks.jsonl -metrics-addr :9100 -log-json
//
// Logs are structured (log/slog; JSON with -log-json) and go to stdout; the metrics
// are logged every -metrics-every groups and, with -metrics-addr, served for
// Prometheus at /metrics. On a terminal, stderr shows a progress bar: groups done and
// sandboxes open (a rollout holds one, and one more while its tests run). It runs
// until interrupted, until -groups groups were sent, or until the API's trainer has
// all its steps.
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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

func main() { cli.Main("serve", run) }

// progressOut is where the progress bar goes (when it is a terminal).
var progressOut io.Writer = os.Stderr

type options struct {
	atroposURL, spool, tasks, hfCache, hfToken string
	vllmURL, model, teacherURL, judgeURL       string
	groups, groupSize, topK, batchSize, steps  int
	metricsEvery                               int
	metricsAddr                                string
	logJSON                                    bool
	seed                                       uint64
}

func parse(args []string, stdout io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&o.atroposURL, "atropos-url", "", "Atropos trajectory API (default: an in-process fake with an in-process trainer)")
	fs.StringVar(&o.spool, "spool", "", "spool directory, required with -atropos-url (default offline: a temporary directory)")
	fs.IntVar(&o.groups, "groups", 0, "stop after this many groups were sent (0: until interrupted or the trainer is done)")
	fs.StringVar(&o.tasks, "tasks", "builtin", "tasks: builtin, FILE.jsonl, FILE.parquet or hf:DATASET_ID")
	fs.StringVar(&o.hfCache, "hf-cache", "", "cache directory of hf: datasets (default: the user cache directory)")
	fs.StringVar(&o.hfToken, "hf-token", "", "Hugging Face token for private or gated hf: datasets")
	fs.StringVar(&o.vllmURL, "vllm-url", "", "vLLM server of the policy (default offline: the in-process simulator)")
	fs.StringVar(&o.model, "model", "", "served model name (default: the server's first model)")
	fs.StringVar(&o.teacherURL, "teacher-url", "", "vLLM server of a frozen teacher (default: the policy)")
	fs.StringVar(&o.judgeURL, "judge-url", "", "vLLM server of the judge (default: the policy)")
	fs.IntVar(&o.groupSize, "group-size", 4, "rollouts per group (a power of two)")
	fs.IntVar(&o.topK, "topk", 20, "teacher top-K per scored token (the server's --max-logprobs must allow it)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for the task order and the split")
	fs.IntVar(&o.metricsEvery, "metrics-every", 10, "log the metrics every N groups (0: never)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics")
	fs.BoolVar(&o.logJSON, "log-json", false, "write logs as JSON lines")
	fs.IntVar(&o.batchSize, "batch-size", 8, "offline: the in-process trainer's batch size, in sequences")
	fs.IntVar(&o.steps, "steps", 2, "offline: the in-process trainer's number of steps")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	err := errors.Join(cli.AtLeast("groups", o.groups, 0), cli.AtLeast("group-size", o.groupSize, 1),
		cli.AtLeast("topk", o.topK, 1), cli.AtLeast("metrics-every", o.metricsEvery, 0))
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

	dataset, err := loadTasks(ctx, o, log)
	if err != nil {
		return err
	}

	policyURL := o.vllmURL
	if policyURL == "" {
		sim, err := scripted.Start(o.topK)
		if err != nil {
			return err
		}
		defer sim.Close()
		policyURL = sim.URL
		log.Info(scripted.Banner(sim, "the policy, the judge and the teacher"))
	}
	sandboxes, err := cli.Sandbox(ctx, o.vllmURL == "" && o.tasks == "builtin", stdout)
	if err != nil {
		return err
	}
	var vopts []vllm.Option
	if o.model != "" {
		vopts = append(vopts, vllm.WithModel(o.model))
	}
	cfg := agenticopd.Config{GroupSize: o.groupSize, DistillTopK: o.topK, Seed: o.seed, Dataset: dataset, Logger: log}
	if cfg.Policy, err = vllm.NewClient(policyURL, vopts...); err != nil {
		return err
	}
	if o.teacherURL != "" {
		if cfg.Teacher, err = vllm.NewClient(o.teacherURL, vopts...); err != nil {
			return err
		}
	}
	if o.judgeURL != "" {
		if cfg.JudgeModel, err = vllm.NewClient(o.judgeURL, vopts...); err != nil {
			return err
		}
	}

	apiURL := o.atroposURL
	trainerDone := make(chan error, 1)
	if apiURL == "" {
		api, err := atropostest.Start()
		if err != nil {
			return err
		}
		defer api.Close()
		apiURL = api.URL()
		log.Info("FAKE API: atropostest with an in-process trainer", "url", apiURL, "steps", o.steps, "batch_size", o.batchSize)
		// The trainer goroutine ends before run returns: cancelled, then waited for.
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
			return err
		}
		defer os.RemoveAll(dir)
		spool = dir
	}
	client, err := atropos.NewClient(apiURL, atropos.ClientConfig{EnvName: "agentic_opd", GroupSize: o.groupSize, SpoolDir: spool})
	if err != nil {
		return err
	}

	progress := cli.NewProgress(progressOut, sandboxes, o.groups)
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
		attrs := []any{"task", g.Task.ID, "scores", g.Data.Scores, "hints", g.Metrics["opd/total_hints"]}
		if g.Dropped != "" {
			log.Info("group dropped", append(attrs, "reason", g.Dropped)...)
		} else {
			sent++ // handed to the client: sent, or in the spool until the API has it
			log.Info("group kept", attrs...)
		}
		if o.metricsEvery > 0 && progress.Groups()%o.metricsEvery == 0 {
			logMetrics(log, env.Metrics())
		}
		if o.groups > 0 && sent >= o.groups {
			stopServe()
		}
	}
	if env, err = agenticopd.NewEnv(cfg); err != nil {
		return err
	}

	if o.metricsAddr != "" {
		stop, err := serveMetrics(o.metricsAddr, envCollector{metrics: env.Metrics, extra: func() map[string]float64 {
			m := map[string]float64{"gauge/sandboxes_open": float64(progress.InFlight())}
			if n, err := client.Spooled(); err == nil {
				m["gauge/spooled_groups"] = float64(n)
			}
			return m
		}}, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	err = env.Serve(sctx, client)
	progress.Close()
	logMetrics(log, env.Metrics())
	switch {
	case err != nil && ctx.Err() == nil && sctx.Err() != nil && errors.Is(err, context.Canceled):
		log.Info("stopping: the groups asked for were sent", "groups", o.groups)
		return nil
	case err != nil:
		return err
	}
	log.Info("the trainer has every step it asked for", "groups_sent", env.Metrics()["env/groups_sent"])
	if o.atroposURL != "" {
		return nil
	}
	// The stop rule counts queued batches as done, so the trainer may still be pulling.
	select {
	case err := <-trainerDone:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadTasks reads -tasks: nil for the built-in tasks.
func loadTasks(ctx context.Context, o options, log *slog.Logger) ([]tasks.Task, error) {
	var (
		ts     []tasks.Task
		report tasks.LoadReport
		err    error
	)
	switch spec := o.tasks; {
	case spec == "builtin":
		return nil, nil
	case strings.HasPrefix(spec, "hf:"):
		cache := o.hfCache
		if cache == "" {
			dir, err := os.UserCacheDir()
			if err != nil {
				return nil, &cli.FlagError{Flag: "hf-cache", Value: `""`, Reason: "set: " + err.Error()}
			}
			cache = filepath.Join(dir, "agenticopd", "hf")
		}
		ts, report, err = tasks.LoadHub(ctx, tasks.HubConfig{Dataset: strings.TrimPrefix(spec, "hf:"), CacheDir: cache, Token: o.hfToken, Logger: log})
	case strings.HasSuffix(spec, ".jsonl"):
		ts, report, err = tasks.LoadJSONL(spec, tasks.LoadConfig{})
	case strings.HasSuffix(spec, ".parquet"):
		ts, report, err = tasks.LoadParquet(spec, tasks.LoadConfig{})
	default:
		return nil, &cli.FlagError{Flag: "tasks", Value: spec, Reason: "builtin, FILE.jsonl, FILE.parquet or hf:DATASET_ID"}
	}
	if err != nil {
		return nil, fmt.Errorf("-tasks %s: %w", o.tasks, err)
	}
	log.Info("tasks loaded", "source", o.tasks, "tasks", len(ts), "rows", report.Rows, "skipped_no_task", report.SkippedNoTask, "no_tests", report.NoTests)
	return ts, nil
}

// logMetrics logs every metric as one record.
func logMetrics(log *slog.Logger, m map[string]float64) {
	attrs := make([]slog.Attr, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		attrs = append(attrs, slog.Float64(k, m[k]))
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "metrics", attrs...)
}

// serveMetrics serves c at http://addr/metrics until stop is called.
func serveMetrics(addr string, c envCollector, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(c))
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
