package agenticopd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestJudgeTruncatedVotesAreCounted runs a group whose judge is a thinking-only model
// on a server of its own, with no reasoning parser: it thinks although enable_thinking
// is false, max_tokens cuts its thought, which holds a drafted decision and hint, and
// the cut text arrives as content. No cut vote becomes a hint, and each is counted as
// judge/truncated_votes.
func TestJudgeTruncatedVotesAreCounted(t *testing.T) {
	thought := `The tests failed at first. Maybe \boxed{1} [HINT_START]Run the tests before writing the fix.[HINT_END] But wait,` +
		strings.Repeat(" let me look at the tool output again", 60) + "</think>\n\n\\boxed{-1}"
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn))
	judgeSim := vllmtest.NewServer(t, vllmtest.WithThinkingOnlyTemplate(),
		vllmtest.WithChatScript(func(vllmtest.ChatScriptInput) []string { return []string{thought} }))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), JudgeModel: judgeSim.Client(), GroupSize: 2,
		DistillTopK: topK, MaxRollouts: 2, KeepEqualScores: true, JudgeMaxTokens: 80})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	votes := g.OPD.Metrics.Votes
	require.NotZero(t, votes)
	require.Zero(t, g.OPD.Metrics.Hints, "no hint is read from a cut thought")
	require.Equal(t, votes, g.OPD.Metrics.UnparsedByReason[judge.UnparsedTruncated])
	require.Equal(t, float64(votes), env.Metrics()["judge/truncated_votes"])
}
