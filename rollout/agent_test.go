package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
)

var startMessages = []chat.Message{
	{Role: chat.RoleSystem, Content: "You are a skilled Python programmer."},
	{Role: chat.RoleUser, Content: "Write add(a, b) in solution.py and test it."},
}

const (
	buggySolution = "def add(a, b):\n    return a - b\n"
	testSolution  = "from solution import add\nassert add(2, 3) == 5, add(2, 3)\nprint('All tests passed!')\n"
)

// fixScript plays an agent that writes a wrong solution, runs the tests, sees them
// fail, fixes the code and runs them again.
var fixScript = []string{
	"I'll write the solution and the tests.\n" +
		call("write_file", map[string]any{"path": "solution.py", "content": buggySolution}) + "\n" +
		call("write_file", map[string]any{"path": "test_solution.py", "content": testSolution}),
	call("terminal", map[string]any{"command": "/usr/bin/python3 test_solution.py"}),
	"The subtraction is wrong.\n" +
		call("patch", map[string]any{"path": "solution.py", "old_string": "a - b", "new_string": "a + b"}),
	call("terminal", map[string]any{"command": "/usr/bin/python3 test_solution.py"}),
	"All tests pass.",
}

func scripted(turns ...string) func(int, string) (string, string) {
	return func(turn int, _ string) (string, string) {
		if turn < len(turns) {
			return turns[turn], rollout.FinishStop
		}
		return "Done.", rollout.FinishStop
	}
}

// checkExact asserts invariant 1 against what the policy saw and produced: every prompt
// sent is a prefix of the trajectory, every output sits verbatim at its turn's span,
// and only those spans are trained on.
func checkExact(t *testing.T, tr *rollout.Trajectory, prompts, outputs [][]int32, outLogprobs [][]float32) {
	t.Helper()
	require.Len(t, outputs, len(tr.Turns), "one turn per generation")
	require.Len(t, tr.Logprobs, len(tr.Tokens))
	for i, p := range prompts {
		require.LessOrEqual(t, len(p), len(tr.Tokens), "prompt %d", i)
		require.Equal(t, p, tr.Tokens[:len(p)], "prompt %d is a prefix of the trajectory", i)
	}
	masks := tr.Masks()
	want := make([]int, len(tr.Tokens))
	for i := range want {
		want[i] = rollout.MaskIgnore
	}
	for i, turn := range tr.Turns {
		require.Equal(t, len(prompts[i]), turn.Start, "turn %d starts where its prompt ended", i)
		require.Equal(t, outputs[i], tr.Tokens[turn.Start:turn.End], "turn %d ids", i)
		if outLogprobs != nil {
			require.Equal(t, outLogprobs[i], tr.Logprobs[turn.Start:turn.End], "turn %d logprobs", i)
		}
		for j := turn.Start; j < turn.End; j++ {
			want[j] = int(tr.Tokens[j])
		}
		require.Less(t, turn.GenPromptStart, turn.Start)
		g := segmentAt(t, tr, turn.GenPromptStart)
		require.Equal(t, rollout.Segment{Kind: rollout.SegGenPrompt, Start: turn.GenPromptStart, End: turn.Start, Message: turn.Message}, g,
			"turn %d opens with its generation prompt, right before its sampled ids", i)
		require.Equal(t, rollout.Segment{Kind: rollout.SegSampled, Start: turn.Start, End: turn.End, Message: turn.Message},
			segmentAt(t, tr, turn.Start), "turn %d is one sampled segment", i)
		require.Equal(t, chat.RoleAssistant, tr.Messages[turn.Message].Role)
	}
	if diff := cmp.Diff(want, masks); diff != "" {
		t.Errorf("masks (-want +got):\n%s", diff)
	}
	// The segments tile the tokens; only sampled ones carry logprobs.
	end, sampled := 0, 0
	for _, s := range tr.Segments {
		require.Equal(t, end, s.Start, "segments are contiguous")
		require.Greater(t, s.End, s.Start)
		if s.Kind == rollout.SegSampled {
			sampled++
		} else {
			require.Equal(t, make([]float32, s.End-s.Start), tr.Logprobs[s.Start:s.End], "no logprobs on a %d segment", s.Kind)
		}
		if s.Kind != rollout.SegPrompt {
			require.GreaterOrEqual(t, s.Message, 0, "a segment after the prompt belongs to a message")
		}
		switch s.Kind {
		case rollout.SegDelta:
			require.Equal(t, chat.RoleTool, tr.Messages[s.Message].Role, "a delta starts at its first tool message")
		case rollout.SegSeparator, rollout.SegCloseSynth:
			require.Equal(t, chat.RoleAssistant, tr.Messages[s.Message].Role, "separators and closes belong to their turn")
		}
		end = s.End
	}
	require.Equal(t, len(tr.Turns), sampled, "one sampled segment per turn")
	require.Equal(t, len(tr.Tokens), end)
	ilp := tr.InferenceLogprobs()
	for i, m := range masks {
		if m == rollout.MaskIgnore {
			require.Equal(t, 1.0, ilp[i], "sentinel at %d", i)
		}
	}
}

func segmentAt(t *testing.T, tr *rollout.Trajectory, pos int) rollout.Segment {
	t.Helper()
	for _, s := range tr.Segments {
		if s.Start <= pos && pos < s.End {
			return s
		}
	}
	t.Fatalf("no segment at %d", pos)
	return rollout.Segment{}
}

func roles(msgs []chat.Message) string {
	var r []string
	for _, m := range msgs {
		r = append(r, m.Role)
	}
	return strings.Join(r, ",")
}

func toolResult(t *testing.T, m chat.Message) map[string]any {
	t.Helper()
	require.Equal(t, chat.RoleTool, m.Role)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(m.Content), &v), m.Content)
	return v
}

func TestAgentFixLoopWithFakePolicy(t *testing.T) {
	p := &fakePolicy{script: scripted(fixScript...)}
	a, err := rollout.NewAgent(p, rollout.Config{})
	require.NoError(t, err)
	sb := newTempSandbox(t)
	tr, stats, err := a.RunStats(context.Background(), startMessages, sb)
	require.NoError(t, err)
	require.Equal(t, rollout.StopNoToolCalls, tr.Stop, tr.Err)
	require.Equal(t, 5, tr.TurnsUsed)
	require.Equal(t, "system,user,assistant,tool,tool,assistant,tool,assistant,tool,assistant,tool,assistant", roles(tr.Messages))
	checkExact(t, tr, p.prompts, p.outputs, nil)

	first := tr.Messages[2]
	require.Equal(t, "I'll write the solution and the tests.", first.Content)
	require.Equal(t, []string{"call_0_0", "call_0_1"}, []string{first.ToolCalls[0].ID, first.ToolCalls[1].ID})
	require.Equal(t, "call_0_1", tr.Messages[4].ToolCallID)
	require.JSONEq(t, `{"path":"solution.py","content":"def add(a, b):\n    return a - b\n"}`, first.ToolCalls[0].Function.Arguments)

	failed := toolResult(t, tr.Messages[6])
	require.Equal(t, 1.0, failed["exit_code"])
	require.Contains(t, failed["output"], "AssertionError: -1")
	passed := toolResult(t, tr.Messages[10])
	require.Equal(t, 0.0, passed["exit_code"])
	require.Equal(t, "All tests passed!", passed["output"])
	require.Equal(t, "All tests pass.", tr.Messages[11].Content)

	// The whole record is the canonical ChatML rendering here, since this fake's
	// tokenizer has no merges: a full re-render matches token for token.
	full, err := p.Render(context.Background(), rollout.RenderRequest{Messages: tr.Messages, Tools: a.ToolDefinitions()})
	require.NoError(t, err)
	require.Equal(t, decode(full.Tokens), decode(tr.Tokens))

	require.Equal(t, rollout.Stats{Rollouts: 1, ToolCalls: 5}, stats)
	require.Equal(t, stats, a.Stats())
	for _, r := range p.lastReqs {
		require.Equal(t, 1.0, r.Sampling.Temperature)
		require.Equal(t, 2048, r.MaxTokens)
	}
}

func TestAgentStops(t *testing.T) {
	echo := call("terminal", map[string]any{"command": "echo hi"})
	tests := []struct {
		name      string
		policy    *fakePolicy
		cfg       rollout.Config
		wantStop  rollout.StopReason
		wantTurns int
		wantStats rollout.Stats
		check     func(t *testing.T, tr *rollout.Trajectory)
	}{
		{
			name:      "answer without tool calls",
			policy:    &fakePolicy{},
			wantStop:  rollout.StopNoToolCalls,
			wantTurns: 1,
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.Equal(t, "<|im_end|>\n", decode(tr.Tokens[len(tr.Tokens)-2:]), "close then separator")
				require.Equal(t, rollout.SegSeparator, tr.Segments[len(tr.Segments)-1].Kind)
			},
		},
		{
			name:      "max turns",
			policy:    &fakePolicy{script: func(int, string) (string, string) { return echo, rollout.FinishStop }},
			cfg:       rollout.Config{MaxTurns: 2},
			wantStop:  rollout.StopMaxTurns,
			wantTurns: 2,
			wantStats: rollout.Stats{ToolCalls: 2},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				last := tr.Segments[len(tr.Segments)-1]
				require.Equal(t, rollout.SegDelta, last.Kind, "the last results are appended without a generation prompt")
				require.True(t, strings.HasSuffix(decode(tr.Tokens), "</tool_response><|im_end|>\n"))
				require.Equal(t, chat.RoleTool, tr.Messages[len(tr.Messages)-1].Role)
			},
		},
		{
			name: "context length",
			policy: &fakePolicy{maxModelLen: 1000, script: func(int, string) (string, string) {
				return call("terminal", map[string]any{"command": "printf '%0200d' 0"}), rollout.FinishStop
			}},
			cfg:       rollout.Config{MinGenerateTokens: 100},
			wantStop:  rollout.StopContextLength,
			wantStats: rollout.Stats{ToolCalls: 2},
			wantTurns: 2,
			check: func(t *testing.T, tr *rollout.Trajectory) {
				g := len(encode("<|im_start|>assistant\n"))
				require.Greater(t, len(tr.Tokens)+g+100, 1000, "the next prompt would not leave 100 tokens")
				require.Equal(t, rollout.SegDelta, tr.Segments[len(tr.Segments)-1].Kind, "no dangling generation prompt")
				require.Contains(t, tr.Err, "want at least 100")
			},
		},
		{
			name: "truncated turn ends the episode",
			policy: &fakePolicy{script: func(int, string) (string, string) {
				return "a long answer " + echo, rollout.FinishStop
			}},
			cfg:       rollout.Config{MaxTokens: 20},
			wantStop:  rollout.StopTruncated,
			wantTurns: 1,
			wantStats: rollout.Stats{TruncatedTurns: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.True(t, tr.Turns[0].Truncated)
				require.Equal(t, rollout.SegSampled, tr.Segments[len(tr.Segments)-1].Kind, "nothing appended after a cut turn")
				require.Equal(t, "a long answer <tool_", tr.Messages[len(tr.Messages)-1].Content, "the cut text, unparsed")
			},
		},
		{
			name: "truncated turn continued with a synthesised close",
			policy: &fakePolicy{script: func(turn int, _ string) (string, string) {
				if turn == 0 {
					return echo + call("terminal", map[string]any{"command": "echo cut off here"}), rollout.FinishStop
				}
				return "Done.", rollout.FinishStop
			}},
			cfg:       rollout.Config{MaxTokens: len(encode(echo)) + 15, ContinueTruncated: true},
			wantStop:  rollout.StopNoToolCalls,
			wantTurns: 2,
			wantStats: rollout.Stats{TruncatedTurns: 1, SynthClose: 1, ToolCalls: 2, InvalidToolCalls: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				end := tr.Turns[0].End
				require.Equal(t, []int32{idImEnd}, tr.Tokens[end:end+1])
				require.Equal(t, rollout.SegCloseSynth, segmentAt(t, tr, end).Kind)
				require.Equal(t, rollout.MaskIgnore, tr.Masks()[end], "a synthesised close is not trained on")
				require.Equal(t, "hi", toolResult(t, tr.Messages[3])["output"])
				require.Contains(t, toolResult(t, tr.Messages[4])["error"], "without </tool_call>")
			},
		},
		{
			name: "alternative close",
			policy: &fakePolicy{script: func(turn int, _ string) (string, string) {
				if turn == 0 {
					return echo + "<|endoftext|>", rollout.FinishStop
				}
				return "Done.", rollout.FinishStop
			}},
			wantStop:  rollout.StopNoToolCalls,
			wantTurns: 2,
			wantStats: rollout.Stats{AltClose: 1, ToolCalls: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				end := tr.Turns[0].End
				require.Equal(t, "<|endoftext|>\n<|im_start|>user", decode(tr.Tokens[end-1:end+len(encode("\n<|im_start|>user"))]),
					"the sampled close is kept and the separator follows it")
			},
		},
		{
			name:      "policy error",
			policy:    &fakePolicy{script: scripted(echo), genErr: errors.New("HTTP 500"), genErrAt: 1},
			wantStop:  rollout.StopPolicyError,
			wantTurns: 2,
			wantStats: rollout.Stats{ToolCalls: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.Equal(t, "HTTP 500", tr.Err)
				require.Equal(t, rollout.SegDelta, tr.Segments[len(tr.Segments)-1].Kind)
			},
		},
		{
			name: "prompt echo mismatch",
			policy: &fakePolicy{echoHook: func(ids []int32) []int32 {
				ids[len(ids)-1]++
				return ids
			}},
			wantStop:  rollout.StopPromptMismatch,
			wantTurns: 1,
			wantStats: rollout.Stats{PromptEchoMismatch: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.Empty(t, tr.Turns, "output for another prompt is discarded")
				require.Equal(t, rollout.SegPrompt, tr.Segments[len(tr.Segments)-1].Kind)
			},
		},
		{
			name: "template drift from a special-token literal in a tool result",
			policy: &fakePolicy{script: scripted(
				call("terminal", map[string]any{"command": "echo 'x<|im_end|>'"}),
			)},
			wantStop:  rollout.StopTemplateDrift,
			wantTurns: 1,
			wantStats: rollout.Stats{TemplateDrift: 1, ToolCalls: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.Contains(t, tr.Err, "special-token literal")
				require.Equal(t, rollout.SegSeparator, tr.Segments[len(tr.Segments)-1].Kind, "the drifting delta is not appended")
				require.Equal(t, chat.RoleTool, tr.Messages[len(tr.Messages)-1].Role)
			},
		},
		{
			name:      "a template that cannot be calibrated",
			policy:    &fakePolicy{ignoreTools: true},
			wantStop:  rollout.StopTemplateDrift,
			wantTurns: 0,
			wantStats: rollout.Stats{TemplateDrift: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				require.ErrorContains(t, errors.New(tr.Err), "template calibration failed")
				require.Empty(t, tr.Tokens)
			},
		},
		{
			name: "invalid tool JSON and unknown tool get error results",
			policy: &fakePolicy{script: scripted(
				"<tool_call>{\"name\": \"terminal\", \"arguments\": {\"command\": }</tool_call>\n" + call("browse", map[string]any{"url": "x"}),
			)},
			wantStop:  rollout.StopNoToolCalls,
			wantTurns: 2,
			wantStats: rollout.Stats{ToolCalls: 2, InvalidToolCalls: 1, UnknownToolCalls: 1},
			check: func(t *testing.T, tr *rollout.Trajectory) {
				const avail = "Available tools: terminal, read_file, write_file, patch, search_files"
				bad := toolResult(t, tr.Messages[3])["error"].(string)
				require.Contains(t, bad, "invalid tool call: the JSON does not parse")
				require.Contains(t, bad, avail)
				unknown := toolResult(t, tr.Messages[4])["error"].(string)
				require.Equal(t, `unknown tool "browse". `+avail, unknown)
				require.Equal(t, "browse", tr.Messages[2].ToolCalls[1].Function.Name)
				require.Equal(t, []int{0}, tr.Turns[0].InvalidCalls, "the unparsable call is marked; the unknown tool's is not")
				require.Empty(t, tr.Turns[1].InvalidCalls)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := rollout.NewAgent(tc.policy, tc.cfg)
			require.NoError(t, err)
			tr, stats, err := a.RunStats(context.Background(), startMessages, newTempSandbox(t))
			require.NoError(t, err)
			require.Equal(t, tc.wantStop, tr.Stop, tr.Err)
			require.Equal(t, tc.wantTurns, tr.TurnsUsed)
			tc.wantStats.Rollouts = 1
			if diff := cmp.Diff(tc.wantStats, stats); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
			outputs := tc.policy.outputs
			if tc.wantStop == rollout.StopPromptMismatch {
				outputs = nil
			}
			checkExact(t, tr, tc.policy.prompts[:len(tr.Turns)], outputs, nil)
			for i, r := range tc.policy.lastReqs {
				if tc.policy.maxModelLen > 0 {
					require.LessOrEqual(t, len(r.Prompt)+r.MaxTokens, tc.policy.maxModelLen, "request %d fits the context", i)
					require.GreaterOrEqual(t, r.MaxTokens, 100)
				}
			}
			if tc.check != nil {
				tc.check(t, tr)
			}
		})
	}
}

func TestAgentLlamaTemplate(t *testing.T) {
	// No separator after the close, a BOS, and one turn per tool result.
	p := &fakePolicy{style: styleLlama, script: scripted(
		call("write_file", map[string]any{"content": "x", "path": "a.txt"}) + "\n" + call("read_file", map[string]any{"path": "a.txt"}),
	)}
	a, err := rollout.NewAgent(p, rollout.Config{})
	require.NoError(t, err)
	tr, err := a.Run(context.Background(), startMessages, newTempSandbox(t))
	require.NoError(t, err)
	require.Equal(t, rollout.StopNoToolCalls, tr.Stop, tr.Err)
	checkExact(t, tr, p.prompts, p.outputs, nil)
	for _, s := range tr.Segments {
		require.NotEqual(t, rollout.SegSeparator, s.Kind)
	}
	full, err := p.Render(context.Background(), rollout.RenderRequest{Messages: tr.Messages, Tools: a.ToolDefinitions()})
	require.NoError(t, err)
	require.Equal(t, decode(full.Tokens), decode(tr.Tokens))
}

func TestAgentCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakePolicy{script: scripted(call("terminal", map[string]any{"command": "sleep 10"}))}
	a, err := rollout.NewAgent(p, rollout.Config{})
	require.NoError(t, err)
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	tr, err := a.Run(ctx, startMessages, newTempSandbox(t))
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, tr)
	require.Equal(t, rollout.StopCanceled, tr.Stop)
}

func TestAgentMisuse(t *testing.T) {
	_, err := rollout.NewAgent(nil, rollout.Config{})
	require.ErrorContains(t, err, "nil Policy")
	dup := append(rollout.DefaultTools(), rollout.DefaultTools()[0])
	_, err = rollout.NewAgent(&fakePolicy{}, rollout.Config{Tools: dup})
	require.ErrorContains(t, err, `two tools named "terminal"`)
	a, err := rollout.NewAgent(&fakePolicy{}, rollout.Config{})
	require.NoError(t, err)
	_, err = a.Run(context.Background(), nil, newTempSandbox(t))
	require.ErrorContains(t, err, "no messages")
	_, err = a.Run(context.Background(), startMessages, nil)
	require.ErrorContains(t, err, "nil Sandbox")
}

func TestAgentConcurrentRuns(t *testing.T) {
	p := &fakePolicy{script: func(turn int, prompt string) (string, string) {
		if strings.Count(prompt, "<tool_response>") >= 1 {
			return "Done.", rollout.FinishStop
		}
		return call("terminal", map[string]any{"command": "echo hi"}), rollout.FinishStop
	}}
	a, err := rollout.NewAgent(p, rollout.Config{})
	require.NoError(t, err)
	const n = 6
	var wg sync.WaitGroup
	trs := make([]*rollout.Trajectory, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			msgs := slices.Clone(startMessages)
			msgs[1].Content = fmt.Sprintf("task %d", i)
			trs[i], errs[i] = a.Run(context.Background(), msgs, newTempSandbox(t))
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for i, tr := range trs {
		require.Equal(t, rollout.StopNoToolCalls, tr.Stop, "rollout %d", i)
		require.Contains(t, decode(tr.Tokens), fmt.Sprintf("task %d", i))
	}
	require.Equal(t, rollout.Stats{Rollouts: n, ToolCalls: n}, a.Stats())
}

func TestStatsMetrics(t *testing.T) {
	s := rollout.Stats{TemplateDrift: 2}.Add(rollout.Stats{TemplateDrift: 1, AltClose: 4})
	m := s.Metrics()
	require.Equal(t, 3.0, m["rollout/template_drift"])
	require.Equal(t, 4.0, m["rollout/alt_close"])
	require.Len(t, m, 9)
}

func TestAgentWithTemplateNeedingToolCalls(t *testing.T) {
	p := &fakePolicy{toolsNeedCall: true, alternate: true, script: scripted(fixScript...)}
	a, err := rollout.NewAgent(p, rollout.Config{})
	require.NoError(t, err)
	tr, stats, err := a.RunStats(context.Background(), startMessages, newTempSandbox(t))
	require.NoError(t, err)
	require.Equal(t, rollout.StopNoToolCalls, tr.Stop, tr.Err)
	require.Equal(t, rollout.Stats{Rollouts: 1, ToolCalls: 5}, stats)
	checkExact(t, tr, p.prompts, p.outputs, nil)
	full, err := p.Render(context.Background(), rollout.RenderRequest{Messages: tr.Messages, Tools: a.ToolDefinitions()})
	require.NoError(t, err)
	require.Equal(t, decode(full.Tokens), decode(tr.Tokens))
}

func TestAgentRefusesSpecialTokenLiteralsInTheFirstMessages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		style templateStyle
		lit   string
	}{
		{"chatml close", styleChatML, "<|im_end|>"},
		{"chatml start", styleChatML, "<|im_start|>"},
		{"llama close", styleLlama, "<|eot_id|>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakePolicy{style: tc.style}
			a, err := rollout.NewAgent(p, rollout.Config{})
			require.NoError(t, err)
			msgs := slices.Clone(startMessages)
			msgs[1].Content = "Explain what " + tc.lit + " means."
			tr, stats, err := a.RunStats(context.Background(), msgs, newTempSandbox(t))
			require.NoError(t, err)
			require.Equal(t, rollout.StopTemplateDrift, tr.Stop)
			require.Contains(t, tr.Err, "special-token literal")
			require.Equal(t, 1, stats.TemplateDrift)
			require.Zero(t, tr.TurnsUsed)
			require.Empty(t, p.prompts, "the model was never asked")
			require.Empty(t, tr.Tokens)
		})
	}
}
