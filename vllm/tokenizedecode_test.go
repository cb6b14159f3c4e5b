package vllm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// tokenizeLikeJSON checks decodeTokenizeResponse against json.Unmarshal.
func tokenizeLikeJSON(t *testing.T, body string) {
	var want TokenizeResponse
	wantErr := json.Unmarshal([]byte(body), &want)
	got, err := decodeTokenizeResponse([]byte(body))
	if wantErr != nil {
		require.Error(t, err, "%q: encoding/json refuses it (%v)", body, wantErr)
		return
	}
	require.NoError(t, err, body)
	require.Equal(t, want, got, body)
}

func TestDecodeTokenizeResponse(t *testing.T) {
	for _, body := range []string{
		`{"count":3,"max_model_len":32768,"tokens":[1,2,3],"token_strs":null}`,
		`{"tokens":[],"token_strs":["a","\u00e9"]}`,
		`{"count":null,"tokens":null,"other":[{"x":1}]}`,
		`{"Count":2,"tokens":[1,2]}`,
		`{"tokens":[1],"tokens":[2]}`,
		`{"count":1.5}`,
		`{"tokens":[1e3]}`,
		`{"token_strs":[1]}`,
		`[]`,
		`{"tokens":[1,2]} x`,
	} {
		tokenizeLikeJSON(t, body)
	}
}

func FuzzDecodeTokenizeResponse(f *testing.F) {
	f.Add(`{"count":2,"max_model_len":10,"tokens":[5,6],"token_strs":["a","b"]}`)
	f.Add(`{"TOKENS":[1],"count":null}`)
	f.Fuzz(tokenizeLikeJSON)
}
