package nemogymtest_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
)

// goodResult is a two-call rollout that passes every check.
func goodResult() map[string]any {
	return map[string]any{
		"responses_create_params": map[string]any{"input": "2+3?"},
		"reward":                  0.85,
		"reward_components":       map[string]any{"correctness": 0.7, "efficiency": 0.15, "tool_use": 0.0},
		"response": map[string]any{"output": []any{
			map[string]any{"type": "function_call", "call_id": "c0", "name": "terminal", "arguments": "{}",
				"prompt_token_ids": []int{101, 102, 103}, "generation_token_ids": []int{7, 8, 9},
				"generation_log_probs":   []float64{-0.1, -0.2, -0.3},
				"teacher_topk_token_ids": [][]int{{7, 4}, {}, {9, 1}}, "teacher_topk_logprobs": [][]float64{{-0.1, -2}, {}, {-0.2, -3}}},
			map[string]any{"type": "function_call_output", "call_id": "c0", "output": "ok"},
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "5"}},
				"prompt_token_ids": []int{101, 102, 103, 7, 8, 9, 55, 56}, "generation_token_ids": []int{21, 9},
				"generation_log_probs": []float64{-0.5, -0.01}},
		}},
	}
}

func output(r map[string]any) []any { return r["response"].(map[string]any)["output"].([]any) }
func item(r map[string]any, i int) map[string]any {
	return output(r)[i].(map[string]any)
}

func TestCheckResult(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(r map[string]any)
		want  error
	}{
		{"valid", func(map[string]any) {}, nil},
		{"no response", func(r map[string]any) { delete(r, "response") }, nemogymtest.ErrMissingKey},
		{"no output", func(r map[string]any) { r["response"] = map[string]any{} }, nemogymtest.ErrMissingKey},
		{"no params", func(r map[string]any) { delete(r, "responses_create_params") }, nemogymtest.ErrMissingKey},
		{"no reward", func(r map[string]any) { delete(r, "reward") }, nemogymtest.ErrMissingKey},
		{"untyped item", func(r map[string]any) { delete(item(r, 1), "type") }, nemogymtest.ErrMissingKey},
		{"retokenized history", func(r map[string]any) {
			item(r, 2)["prompt_token_ids"] = []int{101, 102, 103, 78, 9, 55, 56}
		}, nemogymtest.ErrNonContiguous},
		{"prompt shorter than the history", func(r map[string]any) {
			item(r, 2)["prompt_token_ids"] = []int{101, 102, 103, 7, 8}
		}, nemogymtest.ErrNonContiguous},
		{"no trainable item", func(r map[string]any) {
			for _, i := range []int{0, 2} {
				item(r, i)["generation_token_ids"] = []int{}
				item(r, i)["generation_log_probs"] = []float64{}
				delete(item(r, i), "teacher_topk_token_ids")
				delete(item(r, i), "teacher_topk_logprobs")
			}
		}, nemogymtest.ErrNoTrainable},
		{"a logprob lost", func(r map[string]any) { item(r, 2)["generation_log_probs"] = []float64{-0.5} }, nemogymtest.ErrLogprobCount},
		{"partial token fields", func(r map[string]any) { delete(item(r, 2), "generation_log_probs") }, nemogymtest.ErrPartialTokens},
		{"weighted sum", func(r map[string]any) {
			r["reward_components"] = map[string]any{"correctness": 1.0, "efficiency": 1.0, "tool_use": 0.0}
		}, nemogymtest.ErrRewardSum},
		{"a teacher row short", func(r map[string]any) { item(r, 0)["teacher_topk_token_ids"] = [][]int{{7, 4}, {}} }, nemogymtest.ErrTeacherRows},
		{"not an object", nil, nemogymtest.ErrNotObject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.spoil == nil {
				body = []byte(`[1]`)
			} else {
				r := goodResult()
				tc.spoil(r)
				var err error
				body, err = json.Marshal(r)
				require.NoError(t, err)
			}
			err := nemogymtest.CheckResult(body)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCheckItemsNaN(t *testing.T) {
	items := []nemogym.Item{{Type: "message", TokenInfo: &nemogym.TokenInfo{
		PromptTokenIDs: []int32{1}, GenerationTokenIDs: []int32{2, 3}, GenerationLogProbs: []float32{-1, float32(math.NaN())},
	}}}
	require.ErrorIs(t, nemogymtest.CheckItems(items), nemogymtest.ErrNaN)
	items[0].GenerationLogProbs[1] = -2
	require.NoError(t, nemogymtest.CheckItems(items))
}

func run(task, rollout int64, agent string) nemogymtest.Run {
	res := map[string]json.RawMessage{"_ng_task_index": json.RawMessage(jsonInt(task)), "agent_ref": json.RawMessage(`{"name":"` + agent + `"}`)}
	if rollout >= 0 {
		res["_ng_rollout_index"] = json.RawMessage(jsonInt(rollout))
	}
	return nemogymtest.Run{Result: res}
}

func jsonInt(n int64) []byte { b, _ := json.Marshal(n); return b }

func TestCheckGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []nemogymtest.Run
		ok   bool
	}{
		{"two groups of two", []nemogymtest.Run{run(0, 0, "a"), run(1, 1, "a"), run(0, 1, "a"), run(1, 0, "a")}, true},
		{"no rollout index (NeMo RL)", []nemogymtest.Run{run(0, -1, "a"), run(0, -1, "a")}, true},
		{"a group short", []nemogymtest.Run{run(0, 0, "a"), run(0, 1, "a"), run(1, 0, "a")}, false},
		{"a rollout index twice", []nemogymtest.Run{run(0, 0, "a"), run(0, 0, "a")}, false},
		{"two agents in a group", []nemogymtest.Run{run(0, 0, "a"), run(0, 1, "b")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := nemogymtest.CheckGroups(tc.runs, 2)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.True(t, errors.Is(err, nemogymtest.ErrGroup), "%v", err)
		})
	}
}

func TestClassify(t *testing.T) {
	for status, want := range map[int]string{200: "", 500: nemogymtest.Infra, 503: nemogymtest.Infra, 408: nemogymtest.Infra,
		429: nemogymtest.Infra, 400: nemogymtest.Data, 404: nemogymtest.Data, 422: nemogymtest.Data} {
		require.Equal(t, want, nemogymtest.Classify(status), "status %d", status)
	}
}
