package opd_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// noSandbox is a sandbox the test's tools never use.
type noSandbox struct{}

var errNoSandbox = errors.New("no sandbox in this test")

func (noSandbox) Run(context.Context, rollout.Command) (rollout.CommandResult, error) {
	return rollout.CommandResult{}, errNoSandbox
}
func (noSandbox) ReadFile(string) ([]byte, error) { return nil, errNoSandbox }
func (noSandbox) WriteFile(string, []byte) error  { return errNoSandbox }
func (noSandbox) FS() fs.FS                       { return nil }
func (noSandbox) Close() error                    { return nil }

// lookTool answers every call with the path it was asked about.
func lookTool() rollout.Tool {
	return rollout.FuncTool{
		Def: chat.Tool{Type: "function", Function: chat.ToolFunction{
			Name: "look", Description: "Show a path.",
			Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`),
		}},
		Fn: func(_ context.Context, _ rollout.Sandbox, args json.RawMessage) string {
			var a struct{ Path string }
			_ = json.Unmarshal(args, &a)
			return "listing of " + a.Path
		},
	}
}

// Calls as a Qwen-class model writes them.
const (
	lookA    = "<tool_call>\n{\"name\": \"look\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>"
	lookB    = "<tool_call>\n{\"name\": \"look\", \"arguments\": {\"path\": \"b.py\", \"depth\": [1, 2]}}\n</tool_call>"
	cutJSON  = "<tool_call>\n{\"name\": \"look\", \"arguments\": {\"path\": \n</tool_call>"
	strArgs  = "<tool_call>\n{\"name\": \"look\", \"arguments\": \"the tests\"}\n</tool_call>"
	noName   = "<tool_call>\n{\"arguments\": {\"path\": \"c.py\"}}\n</tool_call>"
	nextTurn = "Now the tests.\n" + lookA
)

// TestTaskPromptKeepsTheModelsCallOrder runs real rollouts against the simulator's
// Qwen-style chat template, in which the first turn mixes calls the agent could and
// could not parse. With TaskPrompt placement the teacher's context is that template's
// rendering of the conversation; for every later turn, everything from the first
// generation prompt to the end of the turn must be the student's own tokens: the
// calls in the order the model wrote them, then their results in the same order.
func TestTaskPromptKeepsTheModelsCallOrder(t *testing.T) {
	tests := []struct {
		name    string
		first   string // the first turn as the model wrote it
		invalid []int  // the calls of the first turn the agent cannot parse
		opts    []vllmtest.Option
	}{
		{"unparsable second", "Let me look around.\n" + lookA + "\n" + cutJSON, []int{1}, nil},
		{"unparsable first", "Let me look around.\n" + cutJSON + "\n" + lookA, []int{0}, nil},
		{"unparsable only", "Let me look around.\n" + cutJSON, []int{0}, nil},
		{"arguments a JSON string that is not an object", "Let me look around.\n" + lookA + "\n" + strArgs, []int{1}, nil},
		{"no prose", lookA + "\n" + noName, []int{1}, nil},
		{"between two readable calls", "Two files, one broken call.\n" + lookA + "\n" + cutJSON + "\n" + lookB, []int{1}, nil},
		{"two unparsable around a readable one", noName + "\n" + lookB + "\n" + strArgs, []int{0, 2}, nil},
		{"every call readable", "Let me look around.\n" + lookA + "\n" + lookB, nil, nil},
		{"thinking template, unparsable second", "<think>\nList the files first.\n</think>\n\nLet me look around.\n" + lookA + "\n" + cutJSON,
			[]int{1}, []vllmtest.Option{vllmtest.WithThinkingTemplate()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turns := []string{tt.first, nextTurn, "Last, the other file.\n" + lookB, "Done."}
			sim := vllmtest.NewServer(t, append([]vllmtest.Option{vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
				return turns[min(in.Turn, len(turns))-1], true
			})}, tt.opts...)...)
			agent, err := rollout.NewAgent(sim.Client(), rollout.Config{Tools: []rollout.Tool{lookTool()}, Greedy: true})
			require.NoError(t, err)
			traj, err := agent.Run(context.Background(), []chat.Message{
				{Role: chat.RoleSystem, Content: "You are a careful programmer."},
				{Role: chat.RoleUser, Content: "Fix the failing test in a.py."},
			}, noSandbox{})
			require.NoError(t, err)
			require.Equal(t, rollout.StopNoToolCalls, traj.Stop, traj.Err)
			require.Len(t, traj.Turns, 4)
			require.Equal(t, tt.invalid, traj.Turns[0].InvalidCalls, "the agent's reading of the first turn")

			var mu sync.Mutex
			var sent scorer.Request
			teacher := scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
				mu.Lock()
				sent = req
				mu.Unlock()
				return sim.Client().Score(ctx, req)
			})
			hint := judge.Func(func(context.Context, judge.Turn) (judge.Hint, error) {
				return judge.Hint{Text: "Read the failing test before you open other files."}, nil
			})
			d, err := opd.New(opd.Config{Judge: hint, Teacher: teacher, Renderer: agent.Template(), Placement: opd.TaskPrompt, TopK: 5})
			require.NoError(t, err)
			res, err := d.Distill(context.Background(), []*rollout.Trajectory{traj})
			require.NoError(t, err)
			for _, tr := range res.Sequences[0].Turns {
				require.Equal(t, opd.StatusScored, tr.Status, "turn %d: %s", tr.Turn, tr.Detail)
			}
			require.Len(t, sent.Sequences, 3, "one teacher sequence per hinted turn (the last turn has no next state)")

			from := traj.Turns[0].GenPromptStart
			for k := 1; k < len(sent.Sequences); k++ {
				student := traj.Tokens[from:traj.Turns[k].End]
				got := sent.Sequences[k].Tokens
				if len(got) < len(student) || !slices.Equal(got[len(got)-len(student):], student) {
					t.Errorf("turn %d: the teacher's context does not end with the student's tokens from the first turn on\n"+
						"student:\n%s\nteacher (same length):\n%s", k, sim.Decode(student), sim.Decode(got[max(0, len(got)-len(student)):]))
				}
			}
			// The hint is in the task prompt, as the reference places it.
			require.True(t, strings.Contains(sim.Decode(sent.Sequences[2].Tokens[:len(sent.Sequences[2].Tokens)-(traj.Turns[2].End-from)]),
				"Fix the failing test in a.py.\n\n"+opd.HintMarker+"\nRead the failing test"))
		})
	}
}
