package vllmtest_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestModelsHealthVersion(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithModel("m1"), vllmtest.WithMaxModelLen(4096), vllmtest.WithVersion("0.10.2"))

	status, body := get(t, s.URL+"/health")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, body)

	status, body = get(t, s.URL+"/version")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"version":"0.10.2"}`, string(body))

	status, body = get(t, s.URL+"/v1/models")
	require.Equal(t, http.StatusOK, status)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &models))
	require.Equal(t, "list", models.Object)
	require.Len(t, models.Data, 1)
	require.Equal(t, "m1", models.Data[0].ID)
	require.Equal(t, 4096, models.Data[0].MaxModelLen)
	require.Equal(t, "m1", s.Model())
}

func TestRoutingErrors(t *testing.T) {
	s := vllmtest.NewServer(t)
	tests := []struct {
		name   string
		do     func() (int, []byte)
		status int
		want   string
	}{
		{"unknown path", func() (int, []byte) { return get(t, s.URL+"/v2/nothing") }, 404, `{"detail":"Not Found"}`},
		{"wrong method", func() (int, []byte) { return get(t, s.URL+"/v1/completions") }, 405, `{"detail":"Method Not Allowed"}`},
		{"wrong media type", func() (int, []byte) {
			resp, err := http.Post(s.URL+"/tokenize", "text/plain", nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			var b json.RawMessage
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
			return resp.StatusCode, b
		}, 415, `{"detail":"Unsupported Media Type: Only 'application/json' is allowed"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := tt.do()
			require.Equal(t, tt.status, status)
			require.JSONEq(t, tt.want, string(body))
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	s, err := vllmtest.Start()
	require.NoError(t, err)
	s.Close()
	s.Close()
	_, err = http.Get(s.URL + "/health")
	require.Error(t, err)
}

func TestBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  vllmtest.Option
	}{
		{"empty model", vllmtest.WithModel("")},
		{"zero max model len", vllmtest.WithMaxModelLen(0)},
		{"max logprobs below -1", vllmtest.WithMaxLogprobs(-2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := vllmtest.Start(tt.opt)
			require.Error(t, err)
			require.Nil(t, s)
		})
	}
}

func TestPromptLogprobsConsistency(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(-1))
	prompt := s.Tokenize("<|im_start|>user\nWrite a function that returns the sum of a list.<|im_end|>\n<|im_start|>assistant\n")
	const k = 5

	var resp completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{
		"prompt": prompt, "max_tokens": 1, "prompt_logprobs": k, "temperature": 0, "return_token_ids": true,
	}, &resp)
	require.Len(t, resp.Choices, 1)
	pl := resp.Choices[0].PromptLogprobs
	require.Len(t, pl, len(prompt))
	require.Nil(t, pl[0], "element 0 must be null")
	require.Equal(t, prompt, resp.Choices[0].PromptTokenIDs)

	var full completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": -1}, &full)
	fpl := full.Choices[0].PromptLogprobs

	for i := 1; i < len(prompt); i++ {
		entries := pl[i]
		actual, ok := entries[prompt[i]]
		require.True(t, ok, "position %d lacks the actual token", i)
		if actual.Rank <= k {
			require.Len(t, entries, k, "position %d", i)
		} else {
			require.Len(t, entries, k+1, "position %d", i)
		}
		// top-k ranks are 1..k and logprobs fall with rank
		byRank := map[int]float32{}
		for id, e := range entries {
			if id != prompt[i] || e.Rank <= k {
				byRank[e.Rank] = e.Logprob
			}
		}
		for r := 1; r <= k; r++ {
			_, ok := byRank[r]
			require.True(t, ok, "position %d lacks rank %d", i, r)
			if r > 1 {
				require.LessOrEqual(t, byRank[r], byRank[r-1], "position %d rank %d", i, r)
			}
		}
		// the full distribution agrees and normalises
		require.Len(t, fpl[i], s.VocabSize())
		var sum float64
		for id, e := range fpl[i] {
			sum += math.Exp(float64(e.Logprob))
			if small, ok := entries[id]; ok {
				require.Equal(t, small.Logprob, e.Logprob)
				require.Equal(t, small.Rank, e.Rank, "position %d id %d", i, id)
			}
		}
		require.InDelta(t, 1.0, sum, 1e-4, "position %d", i)
		byFullRank := make([]float32, s.VocabSize()+1)
		for _, e := range fpl[i] {
			require.Zero(t, byFullRank[e.Rank], "rank %d appears twice at position %d", e.Rank, i)
			byFullRank[e.Rank] = e.Logprob
		}
		for r := 2; r <= s.VocabSize(); r++ {
			require.LessOrEqual(t, byFullRank[r], byFullRank[r-1], "position %d: rank %d is likelier than rank %d", i, r, r-1)
		}
	}
}

func TestSampledLogprobsMatchScoring(t *testing.T) {
	s := vllmtest.NewServer(t)
	prompt := s.Tokenize("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
	var gen completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{
		"prompt": prompt, "max_tokens": 12, "seed": 7, "logprobs": 3,
		"return_token_ids": true, "return_tokens_as_token_ids": true,
	}, &gen)
	c := gen.Choices[0]
	require.NotEmpty(t, c.TokenIDs)
	require.Len(t, c.Logprobs.TokenLogprobs, len(c.TokenIDs))
	for i, id := range c.TokenIDs {
		key := "token_id:" + strconv.Itoa(int(id))
		require.Equal(t, key, c.Logprobs.Tokens[i])
		require.Equal(t, c.Logprobs.TokenLogprobs[i], c.Logprobs.TopLogprobs[i][key])
		require.GreaterOrEqual(t, len(c.Logprobs.TopLogprobs[i]), 3)
		require.LessOrEqual(t, len(c.Logprobs.TopLogprobs[i]), 4)
	}

	// scoring prompt+generation gives the same logprobs for the generated ids
	seq := append(append([]int32(nil), prompt...), c.TokenIDs...)
	var sc completionResponse
	postOK(t, s.URL+"/v1/completions", map[string]any{"prompt": seq, "max_tokens": 1, "prompt_logprobs": 0}, &sc)
	pl := sc.Choices[0].PromptLogprobs
	got := make([]float32, len(c.TokenIDs))
	for i, id := range c.TokenIDs {
		require.Len(t, pl[len(prompt)+i], 1)
		got[i] = pl[len(prompt)+i][id].Logprob
	}
	if diff := cmp.Diff(c.Logprobs.TokenLogprobs, got); diff != "" {
		t.Errorf("sampled vs scored logprobs (-want +got):\n%s", diff)
	}
}
