// Command validate-tasks checks a SWE-style dataset before training on it: for each
// task it grades the gold patch (which must resolve the task) and the empty patch
// (which must not), each in sandboxes of the task's image, exactly as a rollout's
// change is graded (reward.VerifyPatch). Datasets have broken instances (gold patches
// that fail, tests that already pass, tests that need the network); training on them
// is noise. The tasks that fail either check are written to -out, one JSON object a
// line with the reason, and the program exits with status 1 when there is any. A host
// that cannot run the tasks' image sandboxes (without root: no user namespaces, or a
// kernel that refuses overlayfs in one) is refused before any task, with the reason
// and exit status 2: no task is marked failing for it.
//
//	go run ./examples/validate-tasks -tasks swe-bench-lite.jsonl -concurrency 4 -out failing.jsonl
//
// -tasks reads a SWE-bench-style file (.jsonl, .json, .parquet), hf:DATASET_ID[@SPLIT]
// (SWE-bench/SWE-bench_Lite@test), or harbor:DIR (a Harbor task directory, or a
// directory of them). Images are pulled by the images package into -image-cache (the
// default keychain's credentials); -image replaces every task's image (a local
// mirror, or a test image). A progress line is printed per task.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

func main() { cli.Main("validate-tasks", run) }

// ErrInvalidTasks is returned when some task failed a check (exit status 1).
var ErrInvalidTasks = errors.New("some tasks failed validation")

// failure is one line of -out.
type failure struct {
	InstanceID string   `json:"instance_id"`
	Check      string   `json:"check"` // "gold" or "empty"
	Rule       string   `json:"rule,omitempty"`
	Reason     string   `json:"reason"`
	F2PFailing []string `json:"f2p_failing,omitempty"`
	P2PFailing []string `json:"p2p_failing,omitempty"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("validate-tasks", flag.ContinueOnError)
	fs.SetOutput(stdout)
	spec := fs.String("tasks", "", "tasks: FILE.jsonl, FILE.parquet, hf:DATASET_ID[@SPLIT] or harbor:DIR (required)")
	image := fs.String("image", "", "image reference used for every task instead of its own")
	cacheDir := fs.String("image-cache", images.DefaultDir, "directory of the unpacked image cache")
	concurrency := fs.Int("concurrency", 2, "tasks validated at once (each uses up to three sandboxes at a time)")
	out := fs.String("out", "failing-tasks.jsonl", "file the failing tasks are written to")
	testTimeout := fs.Duration("test-timeout", 0, "timeout of a task's test command (default: the task's, else 15m)")
	hfCache := fs.String("hf-cache", "", "cache directory of hf: datasets (default: the user cache directory)")
	hfToken := fs.String("hf-token", "", "Hugging Face token for private or gated hf: datasets (default: $"+cli.HFTokenEnv+")")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *spec == "" {
		return &cli.FlagError{Flag: "tasks", Value: `""`, Reason: "required: a SWE-style dataset to validate"}
	}
	if err := cli.AtLeast("concurrency", *concurrency, 1); err != nil {
		return err
	}
	ts, err := loadTasks(ctx, *spec, *hfCache, cli.HFToken(*hfToken))
	if err != nil {
		return err
	}
	if *image != "" {
		for i := range ts {
			r := *ts[i].Repo
			r.Image = *image
			ts[i].Repo = &r
		}
	}
	cache, err := images.NewCache(images.CacheConfig{Dir: *cacheDir})
	if err != nil {
		return err
	}
	f, err := bwrap.New(ctx, bwrap.Config{Images: cache})
	if err != nil {
		return fmt.Errorf("%w: the tasks' code runs only in bubblewrap sandboxes of their images: %w", cli.ErrSetup, err)
	}
	fails, err := validate(ctx, f, ts, *concurrency, reward.RepoOptions{TestTimeout: *testTimeout}, stdout)
	if err != nil {
		return err
	}
	if err := writeFailures(*out, fails); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d tasks, %d valid, %d failing (written to %s)\n", len(ts), len(ts)-countTasks(fails), countTasks(fails), *out)
	if len(fails) > 0 {
		return ErrInvalidTasks
	}
	return nil
}

// loadTasks reads the repository tasks a -tasks value names.
func loadTasks(ctx context.Context, spec, hfCache, hfToken string) ([]tasks.Task, error) {
	var (
		ts  []tasks.Task
		err error
	)
	switch {
	case strings.HasPrefix(spec, "hf:"):
		id, split, _ := strings.Cut(strings.TrimPrefix(spec, "hf:"), "@")
		if hfCache == "" {
			dir, derr := os.UserCacheDir()
			if derr != nil {
				return nil, &cli.FlagError{Flag: "hf-cache", Value: `""`, Reason: "set: " + derr.Error()}
			}
			hfCache = filepath.Join(dir, "agenticopd", "hf")
		}
		ts, err = tasks.LoadSWEHub(ctx, tasks.HubConfig{Dataset: id, Split: split, CacheDir: hfCache, Token: hfToken}, tasks.SWEConfig{})
	case strings.HasPrefix(spec, "harbor:"):
		ts, err = loadHarbor(strings.TrimPrefix(spec, "harbor:"))
	case strings.HasSuffix(spec, ".jsonl"), strings.HasSuffix(spec, ".json"), strings.HasSuffix(spec, ".parquet"):
		ts, err = tasks.LoadSWE(spec, tasks.SWEConfig{})
	default:
		return nil, &cli.FlagError{Flag: "tasks", Value: spec, Reason: "FILE.jsonl, FILE.parquet, hf:DATASET_ID[@SPLIT] or harbor:DIR"}
	}
	if err != nil {
		return nil, fmt.Errorf("-tasks %s: %w", spec, err)
	}
	return ts, nil
}

// loadHarbor reads one Harbor task directory, or each task directory in dir.
func loadHarbor(dir string) ([]tasks.Task, error) {
	if _, err := os.Stat(filepath.Join(dir, "task.toml")); err == nil {
		t, err := tasks.LoadHarbor(dir, tasks.SWEConfig{})
		return []tasks.Task{t}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ts []tasks.Task
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t, err := tasks.LoadHarbor(filepath.Join(dir, e.Name()), tasks.SWEConfig{})
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: %s holds no Harbor task directory", tasks.ErrNoTasks, dir)
	}
	return ts, nil
}

// validate runs both checks of every task, concurrency tasks at a time, and prints a
// progress line per task. A task whose check could not run (its image, its test
// patch) fails that check with the error as its reason; only ctx ending stops it.
func validate(ctx context.Context, f rollout.SpecFactory, ts []tasks.Task, concurrency int, opts reward.RepoOptions, w io.Writer) ([]failure, error) {
	var (
		mu    sync.Mutex
		fails []failure
		done  atomic.Int64
	)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, t := range ts {
		g.Go(func() error {
			spec := rollout.SandboxSpec{Image: t.Repo.Image, WorkDir: t.Repo.Dir(), Network: t.Repo.Network}
			fresh := rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
				return f.NewSandboxFor(ctx, spec)
			})
			var got []failure
			for _, check := range []string{"gold", "empty"} {
				patch := reward.PatchEmpty
				if check == "gold" {
					patch = reward.PatchGold
				}
				v, err := reward.VerifyPatch(gctx, fresh, t, patch, opts)
				if gctx.Err() != nil {
					return gctx.Err()
				}
				if fl, bad := judge(t.ID, check, v, err); bad {
					got = append(got, fl)
				}
			}
			mu.Lock()
			fails = append(fails, got...)
			mu.Unlock()
			status := "ok"
			if len(got) > 0 {
				status = "FAILING: " + got[0].Check + ": " + got[0].Reason
			}
			fmt.Fprintf(w, "[%d/%d %s] %s %s\n", done.Add(1), len(ts), time.Since(start).Round(time.Second), t.ID, status)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return fails, nil
}

// judge says whether a check's verification fails the task.
func judge(id, check string, v reward.Verification, err error) (failure, bool) {
	fl := failure{InstanceID: id, Check: check, Rule: string(v.Rule)}
	if v.Repo != nil {
		fl.F2PFailing, fl.P2PFailing = v.Repo.F2PFailing, v.Repo.P2PFailing
	}
	switch {
	case err != nil:
		fl.Reason = err.Error()
		return fl, true
	case check == "gold" && v.Rule != reward.RuleResolved:
		fl.Reason = "the gold patch does not resolve the task: " + v.Reason
		return fl, true
	case check == "empty" && v.Rule == reward.RuleResolved:
		fl.Reason = "the task is resolved without any change: its FAIL_TO_PASS tests already pass"
		return fl, true
	case check == "empty" && v.Repo != nil && v.Repo.F2PRate > 0:
		fl.Reason = fmt.Sprintf("%.0f%% of the FAIL_TO_PASS tests pass without any change", 100*v.Repo.F2PRate)
		return fl, true
	}
	return fl, false
}

func countTasks(fails []failure) int {
	ids := map[string]bool{}
	for _, f := range fails {
		ids[f.InstanceID] = true
	}
	return len(ids)
}

// writeFailures writes fails to path, one JSON object a line (an empty file when
// there is none).
func writeFailures(path string, fails []failure) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, f := range fails {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
