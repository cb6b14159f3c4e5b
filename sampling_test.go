package agenticopd_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestNoSamplingFieldLeftToTheServer runs a whole group (rollouts, judge, teacher)
// against a simulator that behaves as vLLM with --generation-config auto on a Qwen3
// model, and fails if any generation request left a sampling field to it.
func TestNoSamplingFieldLeftToTheServer(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn), vllmtest.WithChatScript(judgeScript),
		vllmtest.WithGenerationConfig(map[string]any{"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.0, "repetition_penalty": 1.05}))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK, MaxRollouts: 2})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	require.NotZero(t, g.OPD.Metrics.TeacherRequests, "the teacher was asked")
	require.NotZero(t, g.OPD.Metrics.JudgeCalls, "the judge was asked")

	paths := map[string]int{}
	for _, r := range sim.Requests() {
		require.Empty(t, vllmtest.LeftToServer(r), "%s %s", r.Path, r.Body)
		paths[r.Path]++
	}
	require.NotZero(t, paths["/v1/completions"])
	require.NotZero(t, paths["/v1/chat/completions"])
	for _, r := range sim.Requests() {
		if r.Path == "/v1/chat/completions" {
			require.Equal(t, map[string]any{"enable_thinking": false}, r.JSON["chat_template_kwargs"], "the judge does not think by default")
		}
	}

	want := map[string]any{
		"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
		"presence_penalty": 0.0, "frequency_penalty": 0.0, "max_tokens": agenticopd.DefaultMaxTokens,
	}
	require.Equal(t, want, g.Data.GenerationParams, "the group says what was used")
}

func TestSamplingThatSkewsLogprobsNeedsTheSwitch(t *testing.T) {
	sim := vllmtest.NewServer(t)
	for _, tc := range []struct {
		name string
		mod  func(*agenticopd.Config)
		want string
	}{
		{"temperature", func(c *agenticopd.Config) { c.Temperature = 0.7 }, "temperature 0.7"},
		{"top_p", func(c *agenticopd.Config) { c.TopP = 0.95 }, "top_p 0.95"},
		{"top_k", func(c *agenticopd.Config) { c.TopK = 20 }, "top_k 20"},
		{"min_p", func(c *agenticopd.Config) { c.MinP = 0.05 }, "min_p 0.05"},
		{"repetition", func(c *agenticopd.Config) { c.RepetitionPenalty = 1.1 }, "repetition_penalty 1.1"},
		{"presence", func(c *agenticopd.Config) { c.PresencePenalty = 0.5 }, "presence_penalty 0.5"},
		{"frequency", func(c *agenticopd.Config) { c.FrequencyPenalty = -0.5 }, "frequency_penalty -0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := agenticopd.Config{Policy: sim.Client()}
			tc.mod(&cfg)
			_, err := agenticopd.NewEnv(cfg)
			require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "AllowLogprobMismatch", "the message says what to do")
			cfg.AllowLogprobMismatch = true
			_, err = agenticopd.NewEnv(cfg)
			require.NoError(t, err, "the switch accepts it")
		})
	}
	for _, tc := range []struct {
		name string
		mod  func(*agenticopd.Config)
	}{
		{"TopP", func(c *agenticopd.Config) { c.TopP = 1.5 }},
		{"TopK", func(c *agenticopd.Config) { c.TopK = -2 }},
		{"RepetitionPenalty", func(c *agenticopd.Config) { c.RepetitionPenalty = -1 }},
		{"JudgeSampling", func(c *agenticopd.Config) { c.JudgeSampling = sampling.Params{TopP: 3} }},
		{"JudgeMaxTokens", func(c *agenticopd.Config) { c.JudgeMaxTokens = -1 }},
	} {
		t.Run("invalid "+tc.name, func(t *testing.T) {
			cfg := agenticopd.Config{Policy: sim.Client(), AllowLogprobMismatch: true}
			tc.mod(&cfg)
			_, err := agenticopd.NewEnv(cfg)
			require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.name)
		})
	}
}

func TestSamplingReachesEveryPolicyRequest(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn), vllmtest.WithChatScript(judgeScript))
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), GroupSize: 2, DistillTopK: topK, MaxRollouts: 2, DisableOPD: true, KeepEqualScores: true,
		Temperature: 0.8, TopK: 40, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1.1, PresencePenalty: 0.1, FrequencyPenalty: 0.2,
		AllowLogprobMismatch: true,
	})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	want := map[string]any{
		"temperature": 0.8, "top_p": 0.9, "top_k": 40.0, "min_p": 0.02, "repetition_penalty": 1.1,
		"presence_penalty": 0.1, "frequency_penalty": 0.2,
	}
	n := 0
	for _, r := range sim.Requests() {
		if r.Path != "/v1/completions" {
			continue
		}
		n++
		for k, v := range want {
			require.Equal(t, v, r.JSON[k], k)
		}
	}
	require.NotZero(t, n)
	require.Equal(t, 0.8, g.Data.GenerationParams["temperature"], "the trainer reads the temperature from generation_params")
}

func TestJudgeEmptyContentIsCounted(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn), vllmtest.WithReasoningParser(),
		vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string {
			return []string{`<think>The tests failed, so \boxed{1} [HINT_START]Run the tests first.[HINT_END]`}
		}))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK, MaxRollouts: 2, KeepEqualScores: true})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	votes := g.OPD.Metrics.Votes
	require.NotZero(t, votes)
	require.Equal(t, float64(votes), env.Metrics()["judge/empty_content"])
	require.Zero(t, g.OPD.Metrics.Hints, "no hint is read from reasoning")
}
