package nemogym

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Runner runs one rollout of a task: in its own sandbox, verified, scored, and, when
// distillation is on, given its teacher rows.
// [github.com/agentic-opd/agenticopd.Env.RunOne] is the Runner of this library.
// Implementations must be safe for concurrent use and end when ctx ends; the policy
// they run must reach the model server through ctx's [Session] (see [Policy]).
type Runner interface {
	RunOne(ctx context.Context, task tasks.Task) (Outcome, error)
}

// RunnerFunc adapts a function to a [Runner].
type RunnerFunc func(ctx context.Context, task tasks.Task) (Outcome, error)

// RunOne calls f(ctx, task).
func (f RunnerFunc) RunOne(ctx context.Context, task tasks.Task) (Outcome, error) {
	return f(ctx, task)
}

// Outcome is one finished rollout, as a [Runner] returns it.
type Outcome struct {
	// Trajectory is the token-exact record; its turns become the output items.
	Trajectory *rollout.Trajectory
	// Reward is the scalar reward.
	Reward float64
	// Components are Reward's parts as weighted (for the default reward: correctness
	// 0.7·C, efficiency 0.15·E, tool_use 0.15·U). Their plain sum must be Reward,
	// within NeMo RL's tolerance; nil sends no reward_components.
	Components map[string]float64
	// Rows are the teacher's rows, one per trajectory token; nil when the rollout was
	// not distilled.
	Rows *opd.Rows
}

// ErrRewardSum is wrapped by the error of an [Outcome] whose components do not sum to
// its reward: NeMo RL would reject the rollout (it accepts no weighting of the parts).
var ErrRewardSum = errors.New("nemogym: reward_components do not sum to reward")

// RewardSumOK reports whether reward equals the plain sum of components as NeMo RL
// checks it: math.isclose with rel_tol 1e-5 and abs_tol 1e-6. No components is fine.
func RewardSumOK(reward float64, components map[string]float64) bool {
	if len(components) == 0 {
		return true
	}
	sum := 0.0
	for _, v := range components {
		sum += v
	}
	diff := math.Abs(reward - sum)
	return diff <= max(1e-5*max(math.Abs(reward), math.Abs(sum)), 1e-6)
}

// Items returns the output items of a rollout: per model call its reasoning (if
// any), its message (when it has text, or nothing else), one function_call per tool
// call, the last of them with the call's [TokenInfo] and, when rows is not nil, its
// [TeacherRows]; then one function_call_output per tool result. It also returns the
// usage summed over the calls. Logprobs below [LogprobFloor] are floored; a NaN is an
// error.
func Items(t *rollout.Trajectory, rows *opd.Rows) ([]Item, Usage, error) {
	return items(t, rows, true)
}

// items is Items; with copyRows false, each call's teacher rows are left in rows, out
// of the items' TeacherRows, for the answer's writer to take from there and check as
// Items checks them (see turnRows): they are most of a distilled rollout's answer, and
// copying them into a slice per generated token first costs about half as much as
// writing them.
func items(t *rollout.Trajectory, rows *opd.Rows, copyRows bool) ([]Item, Usage, error) {
	u := Usage{InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	if t == nil {
		return nil, u, errors.New("nemogym: no trajectory")
	}
	if rows != nil && rows.Len() != len(t.Tokens) {
		return nil, u, fmt.Errorf("nemogym: %d teacher rows for %d tokens", rows.Len(), len(t.Tokens))
	}
	var items []Item
	for k, turn := range t.Turns {
		if turn.Message < 0 || turn.Message >= len(t.Messages) || turn.Start > turn.End || turn.End > len(t.Tokens) {
			return nil, u, fmt.Errorf("nemogym: turn %d does not fit its trajectory", k)
		}
		msg := t.Messages[turn.Message]
		call := callItems(k, msg)
		info, err := tokenInfo(t, turn)
		if err != nil {
			return nil, u, fmt.Errorf("nemogym: turn %d: %w", k, err)
		}
		last := &call[len(call)-1]
		last.TokenInfo = info
		if rows != nil && copyRows {
			if last.TeacherRows, err = teacherRows(rows, turn.Start, turn.End); err != nil {
				return nil, u, fmt.Errorf("nemogym: turn %d: %w", k, err)
			}
		}
		items = append(items, call...)
		u.InputTokens += len(info.PromptTokenIDs)
		u.OutputTokens += len(info.GenerationTokenIDs)
		for _, m := range t.Messages[turn.Message+1:] {
			if m.Role != chat.RoleTool {
				break
			}
			out := m.Content
			items = append(items, Item{Type: "function_call_output", ID: "fco_" + m.ToolCallID, CallID: m.ToolCallID, Output: &out})
		}
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return items, u, nil
}

// callItems returns the items of one assistant message, in Gym's model server order.
func callItems(k int, msg chat.Message) []Item {
	var out []Item
	if msg.ReasoningContent != "" {
		out = append(out, Item{Type: "reasoning", ID: fmt.Sprintf("rs_%d", k),
			Summary: []SummaryPart{{Type: "summary_text", Text: msg.ReasoningContent}}})
	}
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		out = append(out, Item{Type: "message", ID: fmt.Sprintf("msg_%d", k), Role: "assistant", Status: "completed",
			Content: []ContentPart{{Type: "output_text", Text: msg.Content, Annotations: []json.RawMessage{}}}})
	}
	for _, tc := range msg.ToolCalls {
		args := tc.Function.Arguments
		out = append(out, Item{Type: "function_call", ID: tc.ID, CallID: tc.ID, Name: tc.Function.Name, Arguments: &args, Status: "completed"})
	}
	return out
}

func tokenInfo(t *rollout.Trajectory, turn rollout.Turn) (*TokenInfo, error) {
	lps, err := floored(t.Logprobs[turn.Start:turn.End:turn.End])
	if err != nil {
		return nil, fmt.Errorf("generated token %w", err)
	}
	return &TokenInfo{
		PromptTokenIDs:     t.Tokens[:turn.Start:turn.Start],
		GenerationTokenIDs: t.Tokens[turn.Start:turn.End:turn.End],
		GenerationLogProbs: lps,
	}, nil
}

// teacherRows returns the rows of positions [start, end); they share the memory of
// rows, which nobody modifies.
func teacherRows(rows *opd.Rows, start, end int) (*TeacherRows, error) {
	tr := &TeacherRows{TokenIDs: make([][]int32, end-start), Logprobs: make([][]float32, end-start)}
	for p := start; p < end; p++ {
		ids, lps := rows.Row(p)
		lps, err := floored(lps)
		if err != nil {
			return nil, fmt.Errorf("teacher row of generated token %w", err)
		}
		tr.TokenIDs[p-start], tr.Logprobs[p-start] = ids, lps
	}
	return tr, nil
}

// floored returns lps with every value below [LogprobFloor] raised to it: lps itself
// when none is, else a copy. A NaN is an error.
func floored(lps []float32) ([]float32, error) {
	first := 0 // the first value that is not at or above the floor: below it, or NaN
	for first < len(lps) && lps[first] >= LogprobFloor {
		first++
	}
	if first == len(lps) {
		return lps, nil // nearly always: one comparison per value
	}
	var out []float32
	for i, lp := range lps[first:] {
		i += first
		switch {
		case math.IsNaN(float64(lp)):
			return nil, fmt.Errorf("%d: logprob is NaN", i)
		case lp < LogprobFloor:
			if out == nil {
				out = slices.Clone(lps)
			}
			out[i] = LogprobFloor
		}
	}
	if out == nil {
		return lps, nil
	}
	return out, nil
}

// response builds the rollout's Response object from its outcome and the request's
// params; with copyRows false, its items leave the teacher rows in out.Rows (see
// items).
func response(id string, created float64, model string, params map[string]json.RawMessage, out Outcome, copyRows bool) (*Response, error) {
	items, usage, err := items(out.Trajectory, out.Rows, copyRows)
	if err != nil {
		return nil, err
	}
	r := &Response{
		ID: id, CreatedAt: created, Model: model, Object: "response", Output: items,
		ParallelToolCalls: true, ToolChoice: json.RawMessage(`"auto"`), Tools: []json.RawMessage{},
		Status: "completed", Usage: &usage,
	}
	if r.Output == nil {
		r.Output = []Item{}
	}
	if v, ok := params["tool_choice"]; ok && string(v) != "null" {
		r.ToolChoice = v
	}
	if v, ok := params["tools"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &r.Tools); err != nil {
			return nil, fmt.Errorf("nemogym: responses_create_params.tools: %w", err)
		}
	}
	if v, ok := params["parallel_tool_calls"]; ok && string(v) == "false" {
		r.ParallelToolCalls = false
	}
	if ts := out.Trajectory.Turns; len(ts) > 0 && ts[len(ts)-1].Truncated {
		r.Status, r.IncompleteDetails = "incomplete", &IncompleteDetails{Reason: "max_output_tokens"}
	}
	return r, nil
}
