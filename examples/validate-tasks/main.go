// Command validate-tasks checks a SWE-style dataset before training on it: for each
// task it grades the gold patch (which must resolve the task) and the empty patch
// (which must not), each in sandboxes of the task's image, exactly as a rollout's
// change is graded (reward.VerifyPatch). Datasets have broken instances (gold patches
// that fail, tests that already pass, tests that need the network); training on them
// is noise. The tasks that fail either check are written to failing-tasks.jsonl in
// -out, one JSON object a line with the reason, and the program exits with status 1
// when there is any. A host that cannot run the tasks' image sandboxes (without root:
// no user namespaces, or a kernel that refuses overlayfs in one) is refused before
// any task, with the reason and exit status 2: no task is marked failing for it.
//
//	go run ./examples/validate-tasks -tasks swe-bench-lite.jsonl -concurrency 4 -out validation
//
// -tasks reads SWE-bench, SWE-Gym, SWE-smith and SWE-rebench files (.jsonl, .json,
// .parquet), hf:DATASET_ID[@SPLIT] (SWE-bench/SWE-bench_Lite@test), or a Harbor task
// directory, or a directory of them (DIR or harbor:DIR), as every program's -tasks
// does. A repository whose rows carry no test command and log parser, and which is
// not in the built-in table (tasks.RepoSpecs), is given in a -specs file. Images are
// pulled by the images package into -image-cache (the default keychain's
// credentials); -image replaces every task's image (a local mirror, or a test image).
// A progress line is printed per task.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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

// failingFile is the file in -out the failing tasks are written to.
const failingFile = "failing-tasks.jsonl"

// failure is one line of -out's failing-tasks.jsonl.
type failure struct {
	InstanceID string   `json:"instance_id"`
	Check      string   `json:"check"` // "gold" or "empty"
	Rule       string   `json:"rule,omitempty"`
	Reason     string   `json:"reason"`
	F2PFailing []string `json:"f2p_failing,omitempty"`
	P2PFailing []string `json:"p2p_failing,omitempty"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("validate-tasks", "checks a dataset of repository tasks before training: the gold patch must resolve each task and the empty patch must not, graded in sandboxes of the task's image", stdout)
	tf := cli.AddTaskFlags(fs, "")
	concurrency := fs.Int("concurrency", 2, cli.Usage("concurrency", "each task uses up to three sandboxes at a time"))
	out := fs.String("out", ".", cli.Usage("out", failingFile))
	testTimeout := fs.Duration("test-timeout", 0, cli.Usage("test-timeout"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if tf.Spec == "" || tf.Spec == "builtin" {
		return &cli.FlagError{Flag: "tasks", Value: strconv.Quote(tf.Spec), Reason: "a dataset of repository tasks to validate"}
	}
	if err := cli.AtLeast("concurrency", *concurrency, 1); err != nil {
		return err
	}
	ts, err := tf.Load(ctx, nil)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Repo == nil {
			return fmt.Errorf("-tasks %s: task %s is not a repository task (validate-tasks checks SWE-bench, SWE-smith and Harbor tasks)", tf.Spec, t.ID)
		}
	}
	cache, err := images.NewCache(images.CacheConfig{Dir: tf.ImageCache})
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
	path := filepath.Join(*out, failingFile)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := writeFailures(path, fails); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d tasks, %d valid, %d failing (written to %s)\n", len(ts), len(ts)-countTasks(fails), countTasks(fails), path)
	if len(fails) > 0 {
		return ErrInvalidTasks
	}
	return nil
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
			status := "ok"
			if len(got) > 0 {
				status = "FAILING: " + got[0].Check + ": " + got[0].Reason
			}
			// One line at a time: w need not be safe for concurrent writes.
			mu.Lock()
			defer mu.Unlock()
			fails = append(fails, got...)
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
