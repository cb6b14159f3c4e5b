package nemogym

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
)

// An answer whose token id lists are copied from the trajectory's text, and whose
// teacher rows are written from the rollout's rows (as the Server writes it), is the
// answer written from its items id by id, whatever the turns look like, and lists
// that are not runs of the trajectory (or not where a run would be) are written id by
// id.
func TestIDTextLikeWrittenAgain(t *testing.T) {
	check := func(name string, out Outcome, change func([]Item)) {
		t.Helper()
		resp, err := response("resp_1", 1, "m", nil, out, true)
		require.NoError(t, err, name)
		lean, err := response("resp_1", 1, "m", nil, out, false)
		require.NoError(t, err, name)
		if change != nil {
			change(resp.Output)
			change(lean.Output)
		}
		res := &Result{Row: map[string]json.RawMessage{"_ng_task_index": json.RawMessage("0")}, Response: resp, Reward: out.Reward, RewardComponents: out.Components}
		want, err := res.AppendJSON(nil)
		require.NoError(t, err, name)
		ids := newIDText(out.Trajectory.Tokens)
		got, err := res.appendJSON(nil, ids, nil)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
		require.LessOrEqual(t, len(got), sizeHint(resp, ids, nil), name)
		require.True(t, json.Valid(got), name)

		var rows *turnRows
		if out.Rows != nil {
			rows = &turnRows{rows: out.Rows, turns: out.Trajectory.Turns}
			for _, it := range lean.Output {
				require.Nil(t, it.TeacherRows, "%s: rows copied", name)
			}
		}
		res.Response = lean
		got, err = res.appendJSON(nil, ids, rows)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
		require.Equal(t, sizeHint(resp, ids, nil), sizeHint(lean, ids, rows), name)
	}
	check("rollout", syntheticOutcome(4, 30, 10, 5, 3, 2), nil)
	check("all hinted", syntheticOutcome(3, 30, 10, 5, 8, 3), nil)
	check("no rows", Outcome{Trajectory: syntheticOutcome(3, 30, 10, 5, 0, 0).Trajectory}, nil)
	edges := syntheticOutcome(3, 30, 10, 5, 4, 3)
	rows := *edges.Rows
	rows.Logprobs = slices.Clone(rows.Logprobs)
	for i, lp := range []float32{float32(math.Inf(-1)), -1e5, -9999, 0, float32(math.Copysign(0, -1)), -2.3841858e-07, -1e-4, -12.345678, -0.5} {
		rows.Logprobs[3*i+1] = lp
	}
	edges.Rows = &rows
	check("floored and edge logprobs", edges, nil)

	// turns at the start, without tokens, and ids of every width
	tr := &rollout.Trajectory{Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}}
	for _, id := range []int32{0, 5, 99999999, 100000000, 2147483647, -1, -2147483648, 42} {
		tr.Tokens = append(tr.Tokens, id)
		tr.Logprobs = append(tr.Logprobs, -0.5)
	}
	for _, span := range [][2]int{{0, 2}, {2, 2}, {2, 5}, {5, 5}, {5, 8}, {8, 8}} {
		tr.Turns = append(tr.Turns, rollout.Turn{Message: len(tr.Messages), Start: span[0], End: span[1]})
		tr.Messages = append(tr.Messages, chat.Message{Role: chat.RoleAssistant, Content: "a"})
	}
	check("odd turns", Outcome{Trajectory: tr}, nil)
	check("copies", Outcome{Trajectory: tr}, func(items []Item) {
		for _, it := range items {
			if it.TokenInfo != nil && len(it.PromptTokenIDs) > 2 {
				it.PromptTokenIDs = slices.Clone(it.PromptTokenIDs)
				it.GenerationTokenIDs = slices.Clone(it.GenerationTokenIDs)
				return
			}
		}
	})
	check("moved", Outcome{Trajectory: tr}, func(items []Item) {
		for _, it := range items {
			if it.TokenInfo != nil && len(it.PromptTokenIDs) > 2 {
				it.PromptTokenIDs = it.PromptTokenIDs[1:]                       // a run, but not from the start
				it.GenerationTokenIDs = tr.Tokens[len(it.PromptTokenIDs)+1 : 8] // a run, but not after the prompt
				return
			}
		}
	})
}

// A NaN in a teacher row fails the answer the same way whether the rows are copied
// into the items or left in the rollout's rows.
func TestTeacherRowsNaN(t *testing.T) {
	out := syntheticOutcome(3, 30, 10, 5, 4, 3)
	rows := *out.Rows
	rows.Logprobs = slices.Clone(rows.Logprobs)
	rows.Logprobs[len(rows.Logprobs)-2] = float32(math.NaN())
	out.Rows = &rows
	_, errCopy := response("resp_1", 1, "m", nil, out, true)
	require.Error(t, errCopy)
	// The lean path, as the Server writes an answer: the rows are checked as written.
	resp, err := response("resp_1", 1, "m", nil, out, false)
	require.NoError(t, err)
	_, errLean := (&Result{Response: resp}).appendJSON(nil, nil, &turnRows{rows: out.Rows, turns: out.Trajectory.Turns})
	require.EqualError(t, errLean, errCopy.Error())
}

// floored raises the values below the floor in a copy, keeps lps when none is, and
// fails at the first NaN, wherever they are.
func TestFloored(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		name    string
		lps     []float32
		want    []float32
		same    bool
		wantErr string
	}{
		{"empty", nil, nil, true, ""},
		{"none below", []float32{0, -0.5, LogprobFloor}, []float32{0, -0.5, LogprobFloor}, true, ""},
		{"first below", []float32{inf, -0.5}, []float32{LogprobFloor, -0.5}, false, ""},
		{"last below", []float32{-0.5, -1e5}, []float32{-0.5, LogprobFloor}, false, ""},
		{"some below", []float32{-1, -1e5, -2, inf, -3}, []float32{-1, LogprobFloor, -2, LogprobFloor, -3}, false, ""},
		{"NaN first", []float32{nan, -1}, nil, false, "0: logprob is NaN"},
		{"NaN after a value below", []float32{-1, inf, -2, nan}, nil, false, "3: logprob is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.lps)
			got, err := floored(tc.lps)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.same, len(got) == 0 || &got[0] == &tc.lps[0], "lps itself when none is below")
			require.True(t, slices.Equal(orig, tc.lps), "lps changed")
		})
	}
}
