// Command repo-demo runs a repository task end to end, offline, in one command: the
// toy repository's task "add" (an issue to fix in a git repository inside a container
// image: toycalc.add returns a - b), one group of rollouts in bubblewrap sandboxes of
// the task's image, each graded as SWE-bench grades (the agent's diff applied in a
// fresh sandbox, the hidden test patch, FAIL_TO_PASS and PASS_TO_PASS), then hints
// and the teacher's top-K rows. The policy is the in-process vLLM simulator
// (vllmtest, a scripted test and demo backend, not a language model) playing
// imagestest.ToyStudent: half the rollouts fix the bug with the patch tool, half
// break it another way.
//
//	sudo go run ./examples/repo-demo
//
// The image is built on this machine (imagestest.WriteToyLayout) and written as an
// OCI layout into -out: no registry and no network, except that its root file system
// is built once per machine with mmdebstrap from the Debian mirror in apt's sources
// (as root, about half a minute; cached). The sandboxes need bubblewrap, and without
// root user namespaces that can mount overlayfs (Linux 5.11 or later). When any of
// these is missing it stops before any rollout, says what to do, and exits with
// status 2.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("repo-demo", run) }

// needsRoot is the advice when the image sandboxes or the image cannot be made.
const needsRoot = "repo-demo builds the toy image's root with mmdebstrap (as root, once per machine) and runs " +
	"sandboxes of the image (bubblewrap; without root, user namespaces that can mount overlayfs): " +
	"run it as root, e.g. sudo go run ./examples/repo-demo"

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("repo-demo", "runs one group of the toy repository task offline, end to end: sandboxes of the task's image, SWE-bench grading, hints and teacher rows", stdout)
	out := fs.String("out", "repo-out", cli.Usage("out", "groups.jsonl, and the toy image as an OCI layout in toy-image"))
	groupSize := fs.Int("group-size", 2, cli.Usage("group-size"))
	topK := fs.Int("topk", cli.DefaultTopK, cli.Usage("topk"))
	imageCache := fs.String("image-cache", images.DefaultDir, cli.Usage("image-cache"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.AtLeast("group-size", *groupSize, 1), cli.AtLeast("topk", *topK, 1)); err != nil {
		return err
	}

	// The sandbox first: without bubblewrap nothing else is worth building.
	sandboxes, err := cli.ImageSandbox(ctx, *imageCache, nil)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, needsRoot)
	}
	sim, err := vllmtest.Start(vllmtest.WithAgentScript((&imagestest.ToyStudent{}).Turn),
		vllmtest.WithChatScript(scripted.Judge), vllmtest.WithMaxLogprobs(*topK))
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintln(stdout, scripted.Banner(sim, "the student, the judge and the teacher"))
	start := time.Now()
	ref, err := imagestest.WriteToyLayout(ctx, filepath.Join(*out, "toy-image"))
	if err != nil {
		return fmt.Errorf("%w: building the toy image: %w\n%s", cli.ErrSetup, err, needsRoot)
	}
	ts, err := imagestest.ToyTasks(ref)
	if err != nil {
		return err
	}
	task := ts[0]
	fmt.Fprintf(stdout, "toy image: %s (%.1f s)\n", ref, time.Since(start).Seconds())
	// One sandbox of the image before any rollout, so that a host where image
	// sandboxes cannot be made says so at once.
	sb, err := sandboxes.NewSandboxFor(ctx, rollout.SandboxSpec{Image: ref, WorkDir: task.Repo.Dir()})
	if err != nil {
		if errors.Is(err, bwrap.ErrImageUnsupported) {
			return fmt.Errorf("%w: %w\n%s", cli.ErrSetup, err, needsRoot)
		}
		return err
	}
	if err := sb.Close(); err != nil {
		return err
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), SandboxFactory: sandboxes, GroupSize: *groupSize, DistillTopK: *topK,
		KeepEqualScores: true, Dataset: ts, EvalSize: tasks.NoEval,
	})
	if err != nil {
		return err
	}
	start = time.Now()
	g, err := env.CollectGroup(ctx, task)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "task %s: %d rollouts in sandboxes of the toy image, %.1f s\n", task.ID, len(g.Rollouts), time.Since(start).Seconds())
	for i, r := range g.Rollouts {
		v := r.Verification
		line := fmt.Sprintf("  rollout %d: %s, correctness %.1f, score %.3f", i, v.Rule, v.Correctness, r.Reward.Reward)
		if v.Repo != nil && len(v.Repo.F2PFailing) > 0 {
			line += ", FAIL_TO_PASS failing: " + strings.Join(v.Repo.F2PFailing, " ")
		}
		fmt.Fprintln(stdout, line)
		if i < len(g.OPD.Sequences) {
			for _, h := range g.OPD.Sequences[i].Hints() {
				if h != "" {
					fmt.Fprintf(stdout, "    hint: %s\n", strings.TrimSpace(h))
				}
			}
		}
	}
	path := filepath.Join(*out, "groups.jsonl")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := atropos.WriteJSONL(f, g.Data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote the group to %s\n", path)
	return nil
}
