package vllmtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
