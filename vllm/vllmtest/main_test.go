package vllmtest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// post sends body as JSON and returns the status and the raw answer.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// postOK posts and decodes a 200 answer into out.
func postOK(t testing.TB, url string, body, out any) {
	t.Helper()
	status, raw := post(t, url, body)
	require.Equal(t, http.StatusOK, status, "body: %s", raw)
	require.NoError(t, json.Unmarshal(raw, out), "body: %.500s", raw)
}

func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// apiError is the nested vLLM error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

type promptLogprob struct {
	Logprob      float32 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken *string `json:"decoded_token"`
}

type completionResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []float32            `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason   string                    `json:"finish_reason"`
		StopReason     any                       `json:"stop_reason"`
		TokenIDs       []int32                   `json:"token_ids"`
		PromptTokenIDs []int32                   `json:"prompt_token_ids"`
		PromptLogprobs []map[int32]promptLogprob `json:"prompt_logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

func stringsReader(s string) io.Reader { return bytes.NewReader([]byte(s)) }
