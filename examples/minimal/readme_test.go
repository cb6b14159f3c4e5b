package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMyJudgeReachesTheTrainer(t *testing.T) {
	agent := func(in vllmtest.ScriptInput) (string, bool) { // the turns the fake model writes
		if in.Turn == 1 {
			return `<tool_call>{"name": "terminal", "arguments": {"command": "ls"}}</tool_call>`, true
		}
		return "Done.", true
	}
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(agent), vllmtest.WithMaxLogprobs(8)) // a fake vLLM on loopback
	api := atropostest.NewServer(t)                                                            // a fake Atropos trajectory API
	api.RegisterTrainer(atropos.TrainerRegistration{BatchSize: 4, MaxTokenLen: 32768, NumSteps: 1})
	api.StartTrainer() // as a trainer's first /batch poll: envs may now register

	alwaysHint := judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		return judge.Hint{Text: "Run the tests before you answer."}, nil
	})
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), Judge: alwaysHint, DistillTopK: 8, KeepEqualScores: true,
	})
	require.NoError(t, err)
	client, err := atropos.NewClient(api.URL(), atropos.ClientConfig{EnvName: "mine", GroupSize: 4, SpoolDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, env.Serve(context.Background(), client)) // returns once the trainer's step is full

	g := api.Received()[0]
	require.Equal(t, 4, g.Len())
	rows := 0
	for s := range g.Len() {
		for p := range g.Tokens[s] {
			if ids, _ := g.DistillRow(s, p); len(ids) == 8 { // the teacher's top-8, with the hint in context
				rows++
			}
		}
	}
	require.Positive(t, rows)
}
