package agenticopd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
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

// TestJudgeUnknownFinishVotesAreCounted runs a group whose judge sits behind a server
// (loopback HTTP) that answers every choice without a finish_reason, with a thought
// cut mid-way as content. No vote is read from it, no hint reaches the teacher, and
// every vote is counted as opd/unparsable_votes/unknown_finish.
func TestJudgeUnknownFinishVotesAreCounted(t *testing.T) {
	const thought = `The tests failed at first. Maybe \\boxed{1} [HINT_START]Run the tests before writing the fix.[HINT_END] But wait,`
	judgeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			N int `json:"n"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		choices := make([]string, max(req.N, 1))
		for i := range choices {
			choices[i] = fmt.Sprintf(`{"index":%d,"message":{"role":"assistant","content":"%s"}}`, i, thought)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1730000000,"model":"judge","choices":[%s],`+
			`"usage":{"prompt_tokens":300,"total_tokens":340,"completion_tokens":40}}`, strings.Join(choices, ","))
	}))
	t.Cleanup(judgeSrv.Close)
	judgeModel, err := vllm.NewClient(judgeSrv.URL, vllm.WithModel("judge"), vllm.WithRetryMax(0))
	require.NoError(t, err)
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), JudgeModel: judgeModel, GroupSize: 2,
		DistillTopK: topK, MaxRollouts: 2, KeepEqualScores: true})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	votes := g.OPD.Metrics.Votes
	require.NotZero(t, votes)
	require.Zero(t, g.OPD.Metrics.Hints, "no hint is read from a choice that may have been cut")
	require.Equal(t, votes, g.OPD.Metrics.UnparsedByReason[judge.UnparsedUnknownFinish])
	require.Equal(t, float64(votes), env.Metrics()["opd/unparsable_votes/"+judge.UnparsedUnknownFinish])
}
