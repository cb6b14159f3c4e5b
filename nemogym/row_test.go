package nemogym_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestParseRow(t *testing.T) {
	known := []tasks.Task{{ID: "k", Statement: "known"}}
	r, err := nemogym.ParseRow([]byte(`{"responses_create_params":{"input":"q","temperature":0.6,"top_p":0.9,"max_output_tokens":512},
		"task":{"id":"t","statement":"S","test_code":"T","hidden_tests":"H","cases":[{"input":"1","output":"2"}]},
		"_ng_task_index":4,"_ng_rollout_index":2,"_ng_attempt_index":1}`), known)
	require.NoError(t, err)
	require.Equal(t, tasks.Task{ID: "t", Statement: "S", TestCode: "T", HiddenTests: "H", Cases: []tasks.Case{{Input: "1", Output: "2"}}}, r.Task)
	require.Equal(t, 0.6, *r.Sampling.Temperature)
	require.Equal(t, 0.9, *r.Sampling.TopP)
	require.Equal(t, 512, r.Sampling.MaxOutputTokens)
	require.EqualValues(t, 4, *r.TaskIndex)
	require.EqualValues(t, 2, *r.RolloutIndex)
	require.EqualValues(t, 1, r.Attempt)

	r, err = nemogym.ParseRow([]byte(`{"responses_create_params":{"input":"q"},"task_id":"k"}`), known)
	require.NoError(t, err)
	require.Equal(t, known[0], r.Task)
	require.Nil(t, r.RolloutIndex)

	for name, body := range map[string]string{
		"max_output_tokens 0":    `{"responses_create_params":{"input":"q","max_output_tokens":0},"task_id":"k"}`,
		"temperature a string":   `{"responses_create_params":{"input":"q","temperature":"hot"},"task_id":"k"}`,
		"rollout index a string": `{"responses_create_params":{"input":"q"},"task_id":"k","_ng_rollout_index":"1"}`,
		"empty statement":        `{"responses_create_params":{"input":"q"},"task":{"statement":" "}}`,
		"params not an object":   `{"responses_create_params":[],"task_id":"k"}`,
	} {
		_, err := nemogym.ParseRow([]byte(body), known)
		require.True(t, errors.Is(err, nemogym.ErrBadRow), "%s: %v", name, err)
	}
}

func FuzzParseRow(f *testing.F) {
	f.Add([]byte(`{"responses_create_params":{"input":"q","temperature":1},"task":{"statement":"s"},"_ng_task_index":1}`))
	f.Add([]byte(`{"responses_create_params":{"input":"q"},"task_id":"k"}`))
	f.Add([]byte(`{"responses_create_params":{"stream":true}}`))
	f.Add([]byte(`null`))
	known := []tasks.Task{{ID: "k", Statement: "known"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := nemogym.ParseRow(body, known)
		if err != nil {
			if !errors.Is(err, nemogym.ErrBadRow) {
				t.Fatalf("error %v does not wrap ErrBadRow", err)
			}
			return
		}
		if r.Params == nil || r.Task.Statement == "" {
			t.Fatalf("accepted a row without params or statement: %s", body)
		}
	})
}

// The rollout id is NeMo Gym's: the explicit _ng_rollout_id, else task-rollout, with
// -a<n> for a later attempt; none without both indices; a malformed explicit id is a
// bad row.
func TestParseRowRolloutID(t *testing.T) {
	const params = `"responses_create_params":{"input":"q"},"task_id":"k"`
	known := []tasks.Task{{ID: "k", Statement: "known"}}
	for _, tc := range []struct{ name, keys, want string }{
		{"indices", `"_ng_task_index":7,"_ng_rollout_index":2`, "7-2"},
		{"indices, attempt 0", `"_ng_task_index":7,"_ng_rollout_index":2,"_ng_attempt_index":0`, "7-2"},
		{"indices, attempt 2", `"_ng_task_index":7,"_ng_rollout_index":2,"_ng_attempt_index":2`, "7-2-a2"},
		{"explicit", `"_ng_rollout_id":"run1.task_7-r2","_ng_task_index":7,"_ng_rollout_index":2`, "run1.task_7-r2"},
		{"explicit, attempt 1", `"_ng_rollout_id":"abc","_ng_attempt_index":1`, "abc-a1"},
		{"explicit null", `"_ng_rollout_id":null,"_ng_task_index":0,"_ng_rollout_index":0`, "0-0"},
		{"task index only (NeMo RL)", `"_ng_task_index":3,"_rowidx":5`, ""},
		{"none", `"x":1`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := nemogym.ParseRow([]byte(`{`+params+`,`+tc.keys+`}`), known)
			require.NoError(t, err)
			require.Equal(t, tc.want, r.RolloutID)
		})
	}
	for name, id := range map[string]string{
		"a number":       `12`,
		"empty":          `""`,
		"a leading dot":  `".x"`,
		"a leading dash": `"-x"`,
		"a slash":        `"a/b"`,
		"a space":        `"a b"`,
		"a path escape":  `"..%2f"`,
		"not ASCII":      `"é"`,
		"an object":      `{"id":"a"}`,
		"a trailing \\n": `"a\n"`,
	} {
		_, err := nemogym.ParseRow([]byte(`{`+params+`,"_ng_rollout_id":`+id+`}`), known)
		require.True(t, errors.Is(err, nemogym.ErrBadRow), "%s: %v", name, err)
		require.ErrorContains(t, err, "_ng_rollout_id", name)
	}
}
