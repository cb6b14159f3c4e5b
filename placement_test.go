package agenticopd_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// A tool call the parser could not read stays in the conversation with the text the
// model wrote as its arguments. With TaskPrompt placement the teacher's context is
// rendered by the server, whose template refuses arguments that are not JSON; the
// group must still be scored, hinted turns after the broken call included.
func TestCollectGroupTaskPromptAfterAnUnparsableToolCall(t *testing.T) {
	const broken = "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"\n</tool_call>"
	c := &coder{}
	script := func(in vllmtest.ScriptInput) (string, bool) {
		// Every rollout opens with a call that does not parse, then works as coder.
		if in.Turn == 1 {
			return "Let me look around first.\n" + broken, true
		}
		shifted := in
		shifted.Turn--
		return c.turn(shifted)
	}
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(script), vllmtest.WithChatScript(judgeScript))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK,
		MaxRollouts: 2, Placement: opd.TaskPrompt, KeepEqualScores: true})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err, "an unparsable call earlier in the conversation must not fail the group")
	require.Empty(t, g.Dropped)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))

	invalid := 0
	for _, r := range g.Rollouts {
		for _, m := range r.Trajectory.Messages {
			for _, tc := range m.ToolCalls {
				var obj map[string]any
				if m.Role == chat.RoleAssistant && json.Unmarshal([]byte(tc.Function.Arguments), &obj) != nil {
					invalid++
				}
			}
		}
	}
	require.Equal(t, 2, invalid, "each rollout keeps its unparsable call in the conversation")
	scored := 0
	for _, s := range g.OPD.Sequences {
		for _, tr := range s.Turns {
			assert.NotEqual(t, opd.StatusTemplateDrift, tr.Status, "turn %d: %s", tr.Turn, tr.Detail)
			if tr.Status == opd.StatusScored {
				scored++
			}
		}
	}
	assert.Positive(t, scored, "the hinted turn after the broken call is scored")
	assert.Equal(t, scored, g.OPD.Metrics.ScoredTurns)
}
