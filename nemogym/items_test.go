package nemogym_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// twoCalls: a turn with reasoning and a tool call only, its tool result, then a
// truncated answer.
func twoCalls() *rollout.Trajectory {
	return &rollout.Trajectory{
		Tokens:   []int32{1, 2, 10, 11, 12, 3, 4, 20, 21},
		Logprobs: []float32{0, 0, -0.5, float32(math.Inf(-1)), -0.1, 0, 0, -1, -2},
		Turns:    []rollout.Turn{{Message: 1, Start: 2, End: 5}, {Message: 3, Start: 7, End: 9, Truncated: true}},
		Messages: []chat.Message{
			{Role: chat.RoleUser, Content: "q"},
			{Role: chat.RoleAssistant, ReasoningContent: "think", ToolCalls: []chat.ToolCall{{ID: "call_0_0", Type: "function", Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}}}},
			{Role: chat.RoleTool, ToolCallID: "call_0_0", Name: "terminal", Content: "a.txt"},
			{Role: chat.RoleAssistant, Content: "done"},
		},
	}
}

func TestItems(t *testing.T) {
	rows := opd.Rows{Offsets: []int32{0, 0, 0, 0, 0, 0, 0, 0, 2, 2}, IDs: []int32{20, 5}, Logprobs: []float32{-0.2, -3}, TokenLogprobs: make([]float32, 9)}
	items, usage, err := nemogym.Items(twoCalls(), &rows)
	require.NoError(t, err)
	args, out := `{"command":"ls"}`, "a.txt"
	want := []nemogym.Item{
		{Type: "reasoning", ID: "rs_0", Summary: []nemogym.SummaryPart{{Type: "summary_text", Text: "think"}}},
		{Type: "function_call", ID: "call_0_0", CallID: "call_0_0", Name: "terminal", Arguments: &args, Status: "completed",
			TokenInfo:   &nemogym.TokenInfo{PromptTokenIDs: []int32{1, 2}, GenerationTokenIDs: []int32{10, 11, 12}, GenerationLogProbs: []float32{-0.5, nemogym.LogprobFloor, -0.1}},
			TeacherRows: &nemogym.TeacherRows{TokenIDs: [][]int32{{}, {}, {}}, Logprobs: [][]float32{{}, {}, {}}}},
		{Type: "function_call_output", ID: "fco_call_0_0", CallID: "call_0_0", Output: &out},
		{Type: "message", ID: "msg_1", Role: "assistant", Status: "completed", Content: []nemogym.ContentPart{{Type: "output_text", Text: "done", Annotations: []json.RawMessage{}}},
			TokenInfo:   &nemogym.TokenInfo{PromptTokenIDs: []int32{1, 2, 10, 11, 12, 3, 4}, GenerationTokenIDs: []int32{20, 21}, GenerationLogProbs: []float32{-1, -2}},
			TeacherRows: &nemogym.TeacherRows{TokenIDs: [][]int32{{20, 5}, {}}, Logprobs: [][]float32{{-0.2, -3}, {}}}},
	}
	if diff := cmp.Diff(want, items); diff != "" {
		t.Fatalf("items (-want +got):\n%s", diff)
	}
	require.Equal(t, 9, usage.InputTokens)
	require.Equal(t, 5, usage.OutputTokens)

	// Encoded and decoded, the items are the same.
	b, err := json.Marshal(items)
	require.NoError(t, err)
	var back []nemogym.Item
	require.NoError(t, json.Unmarshal(b, &back))
	if diff := cmp.Diff(want, back); diff != "" {
		t.Fatalf("items after a round trip (-want +got):\n%s", diff)
	}
}

func TestItemsRefuses(t *testing.T) {
	nan := twoCalls()
	nan.Logprobs[2] = float32(math.NaN())
	_, _, err := nemogym.Items(nan, nil)
	require.ErrorContains(t, err, "NaN")

	short := opd.Rows{Offsets: []int32{0, 0}}
	_, _, err = nemogym.Items(twoCalls(), &short)
	require.ErrorContains(t, err, "1 teacher rows for 9 tokens")

	_, err = json.Marshal(nemogym.Item{Type: "message", TokenInfo: &nemogym.TokenInfo{GenerationLogProbs: []float32{float32(math.Inf(1))}}})
	require.Error(t, err)
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := nemogym.NewWriter(&buf)
	out := nemogym.Outcome{Trajectory: twoCalls(), Reward: 0.5, Components: map[string]float64{"correctness": 0.35, "efficiency": 0.15}}
	require.NoError(t, w.WriteOutcome(3, 1, tasks.Task{ID: "t", Statement: "S"}, out))
	line := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	require.NotContains(t, string(line), "\n", "one line")
	require.NoError(t, nemogymtest.CheckResult(line))
	var res struct {
		Task     int64                               `json:"_ng_task_index"`
		Rollout  int64                               `json:"_ng_rollout_index"`
		Params   struct{ Input []map[string]string } `json:"responses_create_params"`
		Response struct {
			Status            string                     `json:"status"`
			IncompleteDetails *nemogym.IncompleteDetails `json:"incomplete_details"`
		} `json:"response"`
		TaskFields struct{ Statement string } `json:"task"`
	}
	require.NoError(t, json.Unmarshal(line, &res))
	require.EqualValues(t, 3, res.Task)
	require.EqualValues(t, 1, res.Rollout)
	require.Equal(t, []map[string]string{{"type": "message", "role": "user", "content": "q"}}, res.Params.Input)
	require.Equal(t, "incomplete", res.Response.Status)
	require.Equal(t, "max_output_tokens", res.Response.IncompleteDetails.Reason)
	require.Equal(t, "S", res.TaskFields.Statement)

	// The task's hidden tests and graded cases stay out of the file.
	buf.Reset()
	hidden := tasks.Task{ID: "t", Statement: "S", TestCode: "assert True", HiddenTests: "assert LEAK_HIDDEN",
		Cases: []tasks.Case{{Input: "1", Output: "LEAK_CASE"}}, ReferenceSolution: "LEAK_REFERENCE"}
	require.NoError(t, w.WriteOutcome(3, 1, hidden, out))
	require.NotContains(t, buf.String(), "LEAK_")
	var echoed struct {
		Task map[string]any `json:"task"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &echoed))
	require.Equal(t, "assert True", echoed.Task["test_code"])
	require.NotContains(t, echoed.Task, "hidden_tests")
	require.NotContains(t, echoed.Task, "cases")

	out.Components["tool_use"] = 0.15 // no longer sums to 0.5
	require.ErrorIs(t, w.WriteOutcome(3, 2, tasks.Task{ID: "t", Statement: "S"}, out), nemogym.ErrRewardSum)
	require.Error(t, w.WriteLine([]byte(`[1]`)))
}
