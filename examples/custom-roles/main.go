// Command custom-roles shows the parts a user swaps in: a judge of their own (rules,
// not a model), a reward of their own (the default one, minus a penalty for timed-out
// tests), and a frozen teacher on its own server.
//
// It runs offline on two in-process vLLM simulators (vllmtest, scripted test and demo
// backends, not language models): the policy, and a teacher with other weights. With
// -vllm-url the policy is a real server, and the teacher -teacher-url's (the policy's
// without it); the teacher's --max-logprobs is checked against -topk first.
//
//	go run ./examples/custom-roles -groups 1
package main

import (
	"context"
	"errors"
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
	"github.com/agentic-opd/agenticopd/vllm"
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
	fs := cli.NewFlagSet("custom-roles", "collects OPD groups with a judge, a reward and a frozen teacher of one's own in place of the defaults", stdout)
	out := fs.String("out", "custom-out", cli.Usage("out", "groups.jsonl"))
	groups := fs.Int("groups", 1, cli.Usage("groups"))
	topK := fs.Int("topk", cli.DefaultTopK, cli.Usage("topk"))
	vllmURL := fs.String("vllm-url", "", cli.Usage("vllm-url", "default: the in-process simulator"))
	model := fs.String("model", "", cli.Usage("model"))
	teacherURL := fs.String("teacher-url", "", cli.Usage("teacher-url", "default offline: a second simulator with other weights; with -vllm-url, the policy"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.AtLeast("groups", *groups, 1), cli.AtLeast("topk", *topK, 1),
		cli.URL("vllm-url", *vllmURL), cli.URL("teacher-url", *teacherURL)); err != nil {
		return err
	}

	var opts []vllm.Option
	if *model != "" {
		opts = append(opts, vllm.WithModel(*model))
	}
	var policy, teacher *vllm.Client
	policySim, teacherSim := (*vllmtest.Server)(nil), (*vllmtest.Server)(nil)
	if *vllmURL == "" {
		sim, err := scripted.Start(*topK)
		if err != nil {
			return err
		}
		defer sim.Close()
		policySim = sim
		policy = sim.Client()
	} else {
		c, err := vllm.NewClient(*vllmURL, opts...)
		if err != nil {
			return err
		}
		policy = c
		fmt.Fprintf(stdout, "vLLM server: %s\n", *vllmURL)
	}
	switch {
	case *teacherURL != "":
		c, err := vllm.NewClient(*teacherURL, opts...)
		if err != nil {
			return err
		}
		teacher = c
	case *vllmURL == "":
		// A frozen teacher: same tokenizer and template, other weights.
		sim, err := vllmtest.Start(vllmtest.WithModelSeed(7), vllmtest.WithMaxLogprobs(*topK))
		if err != nil {
			return err
		}
		defer sim.Close()
		teacherSim = sim
		teacher = sim.Client()
	default:
		teacher = policy
	}
	switch {
	case teacherSim != nil:
		fmt.Fprintf(stdout, "%s; another vllmtest at %s plays a frozen teacher\n", scripted.Banner(policySim, "the policy"), teacherSim.URL)
	case policySim != nil:
		fmt.Fprintln(stdout, scripted.Banner(policySim, "the policy"))
	}
	// Before any rollout: a teacher that cannot give -topk logprobs fails every hint.
	if err := cli.CheckTopK(ctx, teacher, "topk", *topK); err != nil {
		return err
	}

	sandboxes, err := cli.Sandbox(ctx, *vllmURL == "", stdout) // offline, only scripted commands run
	if err != nil {
		return err
	}
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy:         policy,
		SandboxFactory: sandboxes,
		Teacher:        teacher,
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
	if policySim != nil && teacherSim != nil {
		fmt.Fprintf(stdout, "teacher requests: policy server %d, frozen teacher %d\n",
			countScoring(policySim.Requests()), countScoring(teacherSim.Requests()))
	}
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
