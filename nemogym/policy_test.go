package nemogym_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// twoTurns writes a file, then answers.
func twoTurns(in vllmtest.ScriptInput) (string, bool) {
	if in.Turn == 1 {
		b, _ := json.Marshal(map[string]any{"name": "write_file", "arguments": map[string]any{"path": "a.txt", "content": "hello"}})
		return "Writing.\n<tool_call>\n" + string(b) + "\n</tool_call>", true
	}
	return "Done.", true
}

type rig struct {
	model  *nemogymtest.ModelServer
	policy *nemogym.Policy
	agent  *rollout.Agent
	sb     rollout.Sandbox
}

func newRig(t *testing.T, mc func(*nemogymtest.ModelConfig), agentSampling sampling.Params) *rig {
	t.Helper()
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(twoTurns))
	cfg := nemogymtest.ModelConfig{Backend: sim.Client(), EOS: sim.Tokenize("<|im_end|>")[0], Temperature: 1, TopP: 1}
	if mc != nil {
		mc(&cfg)
	}
	model := nemogymtest.NewModelServer(t, cfg)
	tok, err := vllm.NewClient(model.URL)
	require.NoError(t, err)
	policy, err := nemogym.NewPolicy(nemogym.PolicyConfig{ModelURL: model.URL, Tokenizer: tok})
	require.NoError(t, err)
	t.Cleanup(policy.CloseIdleConnections)
	agent, err := rollout.NewAgent(policy, rollout.Config{MaxTurns: 4, Sampling: agentSampling})
	require.NoError(t, err)
	f, err := bwrap.New(context.Background(), bwrap.Config{})
	require.NoError(t, err)
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	return &rig{model: model, policy: policy, agent: agent, sb: sb}
}

func (r *rig) run(t *testing.T, s *nemogym.Session) *rollout.Trajectory {
	t.Helper()
	ctx := context.Background()
	if s != nil {
		ctx = nemogym.WithSession(ctx, s)
	}
	traj, err := r.agent.Run(ctx, []chat.Message{{Role: chat.RoleUser, Content: "Write a.txt."}}, r.sb)
	require.NoError(t, err)
	return traj
}

// The rollout through the model server records what the server says the engine saw
// and produced; the session holds the same bundles, replayed unchanged.
func TestPolicyRollout(t *testing.T) {
	r := newRig(t, nil, sampling.Params{})
	s := nemogym.NewSession(nemogym.Sampling{})
	traj := r.run(t, s)
	require.Equal(t, rollout.StopNoToolCalls, traj.Stop, traj.Err)
	calls := s.Calls()
	require.Len(t, calls, 2)
	require.Len(t, traj.Turns, 2)
	for i, turn := range traj.Turns {
		require.Equal(t, traj.Tokens[:turn.Start], calls[i].PromptTokenIDs, "call %d prompt", i)
		require.Equal(t, traj.Tokens[turn.Start:turn.End], calls[i].GenerationTokenIDs, "call %d generation", i)
		require.Equal(t, traj.Logprobs[turn.Start:turn.End], calls[i].GenerationLogProbs, "call %d logprobs", i)
	}
	require.Zero(t, r.policy.NonContiguous())
	require.False(t, s.ContextOverflow())
}

// A server that breaks the token rules fails the rollout and is counted; nothing of
// the bad call is recorded.
func TestPolicyRefusesBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     func(call int, a *nemogymtest.Answer)
		want       string
		contiguity bool
	}{
		{"second prompt drops a history token", func(call int, a *nemogymtest.Answer) {
			if call == 2 {
				a.PromptTokenIDs = append(a.PromptTokenIDs[:3:3], a.PromptTokenIDs[4:]...)
			}
		}, "does not begin with", true},
		{"first prompt is not the agent's", func(call int, a *nemogymtest.Answer) {
			if call == 1 {
				a.PromptTokenIDs = append([]int32{1}, a.PromptTokenIDs...)
			}
		}, "differs from the agent's", true},
		{"no token information", func(_ int, a *nemogymtest.Answer) { a.PromptTokenIDs = nil }, "lacks token information", false},
		{"a logprob lost", func(_ int, a *nemogymtest.Answer) {
			a.GenerationLogProbs = a.GenerationLogProbs[:len(a.GenerationLogProbs)-1]
		}, "logprobs for", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(c *nemogymtest.ModelConfig) { c.Answer = tc.answer }, sampling.Params{})
			traj := r.run(t, nemogym.NewSession(nemogym.Sampling{}))
			require.Equal(t, rollout.StopPolicyError, traj.Stop)
			require.Contains(t, traj.Err, tc.want)
			if tc.contiguity {
				require.EqualValues(t, 1, r.policy.NonContiguous())
			}
		})
	}
}

// The row's temperature and top_p reach every call, over the agent's own; without
// them the trainer's server refuses the call.
func TestPolicySendsTheRowsSampling(t *testing.T) {
	r := newRig(t, func(c *nemogymtest.ModelConfig) { c.Temperature, c.TopP = 0.6, 0.9 }, sampling.Params{Temperature: 1})
	temp, topP := 0.6, 0.9
	traj := r.run(t, nemogym.NewSession(nemogym.Sampling{Temperature: &temp, TopP: &topP}))
	require.Equal(t, rollout.StopNoToolCalls, traj.Stop, traj.Err)

	traj = r.run(t, nemogym.NewSession(nemogym.Sampling{}))
	require.Equal(t, rollout.StopPolicyError, traj.Stop)
	require.Contains(t, traj.Err, "500")
}

func TestPolicyErrors(t *testing.T) {
	r := newRig(t, nil, sampling.Params{})
	_, err := r.policy.Generate(context.Background(), rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}})
	require.ErrorIs(t, err, nemogym.ErrNoSession)

	r.model.SetError(503)
	ctx := nemogym.WithSession(context.Background(), nemogym.NewSession(nemogym.Sampling{}))
	_, err = r.policy.Generate(ctx, rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1, Sampling: sampling.Neutral(1),
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}})
	var apiErr *nemogym.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, 503, apiErr.Status)
	require.True(t, strings.Contains(err.Error(), "injected"))
}

// Every sampling field reaches the engine through NeMo Gym's model server, which
// drops top-level keys it does not declare: top_k travels in metadata.extra_body, and
// the trainer's server refuses a top_k it does not sample with.
func TestPolicyStatesEveryField(t *testing.T) {
	r := newRig(t, nil, sampling.Params{TopK: 20})
	traj := r.run(t, nemogym.NewSession(nemogym.Sampling{}))
	require.Equal(t, rollout.StopPolicyError, traj.Stop)
	require.Contains(t, traj.Err, "top_k is 20")
}

// A server whose parsers separated the reasoning and the tool calls: the text the
// agent parses has them back, as <think> and Hermes <tool_call> blocks.
func TestPolicyUndoesServerParsers(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
			"content":"Running.","reasoning_content":"the tests first",
			"tool_calls":[{"id":"x","type":"function","function":{"name":"terminal","arguments":"{\"command\":\"ls\"}"}}],
			"prompt_token_ids":[1,2],"generation_token_ids":[7,8],"generation_log_probs":[-0.5,-0.25]}}]}`)
	}))
	defer hs.Close()
	tok, err := vllm.NewClient(hs.URL)
	require.NoError(t, err)
	p, err := nemogym.NewPolicy(nemogym.PolicyConfig{ModelURL: hs.URL, Tokenizer: tok})
	require.NoError(t, err)
	ctx := nemogym.WithSession(context.Background(), nemogym.NewSession(nemogym.Sampling{}))
	g, err := p.Generate(ctx, rollout.GenerateRequest{Prompt: []int32{1, 2}, MaxTokens: 8, Sampling: sampling.Neutral(1),
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}})
	require.NoError(t, err)
	require.Equal(t, rollout.FinishStop, g.FinishReason)
	parsed := rollout.Hermes{}.Parse(g.Text)
	require.Equal(t, "the tests first", parsed.Reasoning)
	require.Equal(t, "Running.", strings.TrimSpace(parsed.Content))
	require.Len(t, parsed.Calls, 1)
	require.Equal(t, "terminal", parsed.Calls[0].Name)
	require.JSONEq(t, `{"command":"ls"}`, string(parsed.Calls[0].Arguments))
}

// An engine with a shorter context than the tokenizer says: NeMo Gym's model server
// answers an empty completion without tokens; the rollout fails with a clear error.
func TestPolicyContextOverflow(t *testing.T) {
	r := newRig(t, func(c *nemogymtest.ModelConfig) { c.MaxModelLen = 8 }, sampling.Params{})
	sess := nemogym.NewSession(nemogym.Sampling{})
	traj := r.run(t, sess)
	require.Equal(t, rollout.StopPolicyError, traj.Stop)
	require.Contains(t, traj.Err, "context overflow")
	require.True(t, sess.ContextOverflow(), "the session tells the agent server")
}
