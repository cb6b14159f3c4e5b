// Command custom-roles shows the parts a user swaps in: a judge of their own (rules,
// not a model), a reward of their own (the default one, minus a penalty for timed-out
// tests), and a frozen teacher on its own server.
//
// It runs offline on two in-process vLLM simulators (vllmtest, scripted test and demo
// backends, not language models): the policy, and a teacher with other weights.
//
//	go run ./examples/custom-roles -groups 1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("custom-roles", run) }

// ruleJudge hints whenever a tool result shows a Python traceback: a judge without a
// model, cheap and deterministic. Any judge.Judge works; judgetest checks one.
func ruleJudge(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
	if err := ctx.Err(); err != nil {
		return judge.Hint{}, err
	}
	if turn.NextStateRole != "tool" || !strings.Contains(turn.NextState, "Traceback") {
		return judge.Hint{Votes: []judge.Vote{{Score: -1, Raw: "no traceback"}}}, nil
	}
	hint := "The tests raised an exception; read the traceback and fix the failing function before running them again."
	return judge.Hint{Text: hint, Votes: []judge.Vote{{Score: 1, Hint: hint, Raw: "traceback"}}}, nil
}

// timeoutPenalty is the default reward, minus 0.1 when the tests timed out.
func timeoutPenalty(ctx context.Context, in reward.Input) (reward.Breakdown, error) {
	b, err := reward.Default{}.Score(ctx, in)
	if err == nil && in.Verification.TimedOut {
		b.Reward = max(0, b.Reward-0.1)
	}
	return b, err
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("custom-roles", flag.ContinueOnError)
	fs.SetOutput(stdout)
	out := fs.String("out", "custom-out", "directory for groups.jsonl")
	groups := fs.Int("groups", 1, "number of groups to collect")
	topK := fs.Int("topk", agenticopd.DefaultDistillTopK, "teacher top-K per scored token")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.AtLeast("groups", *groups, 1), cli.AtLeast("topk", *topK, 1)); err != nil {
		return err
	}

	policy, err := scripted.Start(*topK)
	if err != nil {
		return err
	}
	defer policy.Close()
	// A frozen teacher: same tokenizer and template, other weights.
	teacher, err := vllmtest.Start(vllmtest.WithModelSeed(7), vllmtest.WithMaxLogprobs(*topK))
	if err != nil {
		return err
	}
	defer teacher.Close()
	fmt.Fprintf(stdout, "%s; another vllmtest at %s plays a frozen teacher\n", scripted.Banner(policy, "the policy"), teacher.URL)

	sandboxes, err := cli.Sandbox(ctx, true, stdout) // only scripted commands run
	if err != nil {
		return err
	}
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy:         policy.Client(),
		SandboxFactory: sandboxes,
		Teacher:        teacher.Client(),
		Judge:          judge.Func(ruleJudge),
		Reward:         reward.Func(timeoutPenalty),
		DistillTopK:    *topK,
		OnGroup: func(g *agenticopd.Group) {
			fmt.Fprintf(stdout, "group %s: scores %.3f, %g hints, %g scored turns\n",
				g.Task.ID, g.Data.Scores, g.Metrics["opd/total_hints"], g.Metrics["opd/total_scored_turns"])
		},
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(*out, "groups.jsonl"))
	if err != nil {
		return err
	}
	if err := env.Process(ctx, *groups, f); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(stdout, "teacher requests: policy server %d, frozen teacher %d\n",
		countScoring(policy.Requests()), countScoring(teacher.Requests()))
	return f.Close()
}

// countScoring counts the teacher-scoring requests a simulator received.
func countScoring(reqs []vllmtest.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil {
			n++
		}
	}
	return n
}
