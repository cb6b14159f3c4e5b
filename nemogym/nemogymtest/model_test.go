package nemogymtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newModel(t *testing.T) *nemogymtest.ModelServer {
	t.Helper()
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		return "answer number " + string(rune('0'+in.Turn)), true
	}))
	return nemogymtest.NewModelServer(t, nemogymtest.ModelConfig{
		Backend: sim.Client(), EOS: sim.Tokenize("<|im_end|>")[0], Temperature: 1, TopP: 1,
	})
}

func post(t *testing.T, url string, body map[string]any) (int, map[string]any, string) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, string(raw)
}

func request(msgs ...any) map[string]any {
	return map[string]any{"messages": msgs, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 32,
		"logprobs": true, "top_logprobs": 0}
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func TestModelServerRefuses(t *testing.T) {
	m := newModel(t)
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		status int
	}{
		{"n 2", func(r map[string]any) { r["n"] = 2 }, 500},
		{"top_k 20 in metadata.extra_body", func(r map[string]any) {
			r["metadata"] = map[string]string{"extra_body": `{"top_k": 20}`}
		}, 500},
		{"top_k 20 at the top level (Gym drops it)", func(r map[string]any) { r["top_k"] = 20 }, 200},
		{"no top_p", func(r map[string]any) { delete(r, "top_p") }, 500},
		{"not the trainer's temperature", func(r map[string]any) { r["temperature"] = 0.7 }, 500},
		{"partial token fields", func(r map[string]any) {
			r["messages"] = []any{user("hi"), map[string]any{"role": "assistant", "content": "x", "prompt_token_ids": []int{1}}, user("again")}
		}, 422},
		{"invented token fields", func(r map[string]any) {
			r["messages"] = []any{user("hi"), map[string]any{"role": "assistant", "content": "x",
				"prompt_token_ids": []int{1}, "generation_token_ids": []int{2}, "generation_log_probs": []float64{-1}}, user("again")}
		}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(user("hi"))
			tc.change(r)
			status, _, body := post(t, m.URL, r)
			require.Equal(t, tc.status, status, body)
		})
	}
}

// A replayed bundle must be the one the server gave, to the last logprob; the next
// prompt then begins with it (the splice).
func TestModelServerReplay(t *testing.T) {
	m := newModel(t)
	status, first, body := post(t, m.URL, request(user("hi")))
	require.Equal(t, 200, status, body)
	msg := first["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	for _, k := range []string{"prompt_token_ids", "generation_token_ids", "generation_log_probs"} {
		require.Contains(t, msg, k)
	}
	seen := append(ints(msg["prompt_token_ids"]), ints(msg["generation_token_ids"])...)

	replay := func(lps []any) map[string]any {
		return map[string]any{"role": "assistant", "content": msg["content"], "prompt_token_ids": msg["prompt_token_ids"],
			"generation_token_ids": msg["generation_token_ids"], "generation_log_probs": lps}
	}
	status, second, body := post(t, m.URL, request(user("hi"), replay(msg["generation_log_probs"].([]any)), user("again")))
	require.Equal(t, 200, status, body)
	prompt := ints(second["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["prompt_token_ids"])
	require.GreaterOrEqual(t, len(prompt), len(seen))
	if diff := cmp.Diff(seen, prompt[:len(seen)]); diff != "" {
		t.Fatalf("the second prompt does not extend the first call (-want +got):\n%s", diff)
	}

	changed := slices.Clone(msg["generation_log_probs"].([]any))
	changed[0] = changed[0].(float64) - 0.5
	status, _, body = post(t, m.URL, request(user("hi"), replay(changed), user("again")))
	require.Equal(t, 400, status, body)
}

func TestModelServerErrorInjection(t *testing.T) {
	m := newModel(t)
	m.SetError(503, 429)
	for _, want := range []int{503, 429, 200} {
		status, _, body := post(t, m.URL, request(user("hi")))
		require.Equal(t, want, status, body)
	}
}

func ints(v any) []int {
	var out []int
	for _, x := range v.([]any) {
		out = append(out, int(x.(float64)))
	}
	return out
}

func TestCollectorExpand(t *testing.T) {
	a := map[string]any{"responses_create_params": map[string]any{"input": "a"}}
	b := map[string]any{"responses_create_params": map[string]any{"input": "b"}}
	c := nemogymtest.Collector{Driver: nemogymtest.Standalone}
	list, err := c.Expand([]map[string]any{a, b, a}, 2)
	require.NoError(t, err)
	var got [][2]any
	for _, r := range list {
		got = append(got, [2]any{r["_ng_task_index"], r["_ng_rollout_index"]})
	}
	want := [][2]any{{int64(0), int64(0)}, {int64(0), int64(1)}, {int64(1), int64(0)}, {int64(1), int64(1)}, {int64(0), int64(2)}, {int64(0), int64(3)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("dispatch list (-want +got):\n%s", diff)
	}

	c = nemogymtest.Collector{Driver: nemogymtest.NeMoRL, Temperature: 0.6, TopP: 0.9, MaxNewTokens: 64}
	list, err = c.Expand([]map[string]any{a}, 2)
	require.NoError(t, err)
	for i, r := range list {
		require.NotContains(t, r, "_ng_rollout_index")
		require.Equal(t, i, r["_rowidx"])
		p := r["responses_create_params"].(map[string]any)
		require.Equal(t, 0.6, p["temperature"])
		require.Equal(t, 0.9, p["top_p"])
		require.Equal(t, 64, p["max_output_tokens"])
	}
}

// NeMo Gym's per-rollout prefix is stripped and its id recorded; a path whose id
// NeMo Gym would not match is not found.
func TestModelServerRolloutPrefix(t *testing.T) {
	m := newModel(t)
	for _, tc := range []struct {
		prefix string
		status int
	}{
		{"", 200},
		{"/ng-rollout/7-2", 200},
		{"/ng-rollout/run.1_x-a2", 200},
		{"/ng-rollout/.hidden", 404},
		{"/ng-rollout/", 404},
	} {
		status, _, raw := post(t, m.URL+tc.prefix, request(user("hi")))
		require.Equal(t, tc.status, status, "%q: %s", tc.prefix, raw)
	}
	require.Equal(t, []string{"", "7-2", "run.1_x-a2"}, m.RolloutIDs())
	resp, err := http.Get(m.URL + "/ng-rollout/7-2/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "the readiness path under the prefix")
}
