package vllmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// idPromptLikeJSON checks that decodeIDPrompt, when it takes a body, decodes it as
// encoding/json does, and that it takes the common request.
func idPromptLikeJSON(t *testing.T, body string) {
	var got completionRequest
	if !decodeIDPrompt([]byte(body), &got) {
		return
	}
	var want completionRequest
	require.NoError(t, json.Unmarshal([]byte(body), &want), "decodeIDPrompt took a body encoding/json refuses: %q", body)
	var ids []int32
	require.NoError(t, json.Unmarshal(want.Prompt, &ids), body)
	require.Equal(t, ids, got.promptIDs, body)
	got.promptIDs = nil
	require.Equal(t, want, got, body)
}

func TestDecodeIDPrompt(t *testing.T) {
	taken := []string{
		`{"model":"m","prompt":[1,2,3],"max_tokens":5,"logprobs":0,"return_token_ids":true}`,
		` { "prompt" : [ 151644 , 8 ] , "n" : 2 } `,
		`{"prompt":[],"model":"m"}`,
		`{"\u0070rompt":[7],"stop":["a","b"],"extra":{"x":[1,{"y":null}]}}`,
		`{"model":"m","prompt":[1],"model":"n"}`,
	}
	for _, body := range taken {
		var req completionRequest
		require.True(t, decodeIDPrompt([]byte(body), &req), body)
		idPromptLikeJSON(t, body)
	}
	for _, body := range []string{
		`{"prompt":"text"}`, `{"prompt":[[1,2],[3]]}`, `{"prompt":[1],"prompt":[2]}`, `{"Prompt":[1]}`,
		`{"prompt":[1],"PROMPT":[2]}`, `{"prompt":[1.5]}`, `{"prompt":[1],"max_tokens":"x"}`,
		`{"prompt":[1],}`, `{"prompt":[1]} x`, `{"model":"m"}`, `[1]`, `{"prompt":[1],"n":1e999}`,
		"{\"prompt\":[1],\"model\":\"\xff\"}", `{"prompt":[2147483648]}`, `{"prompt":[1 2]}`,
	} {
		idPromptLikeJSON(t, body)
	}
	for _, body := range []string{`{"prompt":"text"}`, `{"prompt":[1],"prompt":[2]}`, `{"Prompt":[1]}`, `{"prompt":[1],"max_tokens":"x"}`, `{"prompt":[1],}`} {
		var req completionRequest
		require.False(t, decodeIDPrompt([]byte(body), &req), body)
	}
}

func FuzzDecodeIDPrompt(f *testing.F) {
	f.Add(`{"model":"m","prompt":[1,2,3],"max_tokens":5}`)
	f.Add(`{"prompt":[0],"stop":null,"seed":-1,"temperature":0.5}`)
	f.Add(`{"prompt":[1],"Max_Tokens":3,"max_tokens":4}`)
	f.Fuzz(idPromptLikeJSON)
}

// TestTokenizedLikeWriteJSON checks the hand-written /tokenize answer against
// encoding/json's writing of the same map.
func TestTokenizedLikeWriteJSON(t *testing.T) {
	for _, ids := range [][]int32{nil, {}, {0}, {151644, 872, 198, 9707, 0, 7}} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeTokenized(got, ids, 32768)
		writeJSON(want, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": 32768, "tokens": nonNil(ids), "token_strs": nil})
		require.Equal(t, want.Body.String(), got.Body.String())
		require.Equal(t, want.Code, got.Code)
		require.Equal(t, want.Header(), got.Header())
	}
}

// TestGenerationResponseLength checks that a generation response states its length,
// as vLLM's do, unless it is too large to hold (then it is streamed, and whole).
func TestGenerationResponseLength(t *testing.T) {
	s := NewServer(t)
	post := func(body string) *http.Response {
		resp, err := http.Post(s.URL+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}
	small := post(`{"prompt":[1,2,3],"max_tokens":4,"seed":1,"logprobs":1}`)
	raw, err := io.ReadAll(small.Body)
	require.NoError(t, err)
	require.Equal(t, int64(len(raw)), small.ContentLength)
	require.True(t, json.Valid(raw))

	ids := make([]string, 6000)
	for i := range ids {
		ids[i] = strconv.Itoa(100 + i%500)
	}
	large := post(`{"prompt":[` + strings.Join(ids, ",") + `],"max_tokens":1,"prompt_logprobs":20}`)
	require.Equal(t, int64(-1), large.ContentLength, "a response over 4 MiB is streamed")
	raw, err = io.ReadAll(large.Body)
	require.NoError(t, err)
	require.Greater(t, len(raw), maxSized)
	require.True(t, json.Valid(raw))
}
