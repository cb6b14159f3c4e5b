package vllm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// leanLikeFull checks that decoding a completion whose choice carries block as its
// logprobs member without top_logprobs gives what the full decoding gives, with
// TopLogprobs nil, and fails exactly when it fails.
func leanLikeFull(t *testing.T, block string) {
	body := []byte(`{"choices":[{"index":0,"text":"x","logprobs":` + block + `}]}`)
	want, wantErr := decodeCompletionResponse(body, decodeAll)
	got, err := decodeCompletionResponse(body, decodeNoTopLogprobs)
	if wantErr != nil {
		require.Error(t, err, "%q: the full decoding refuses it (%v)", block, wantErr)
		return
	}
	require.NoError(t, err, block)
	if lp := want.Choices[0].Logprobs; lp != nil {
		lp.TopLogprobs = nil
	}
	require.Equal(t, want, got, block)
}

func TestDecodeWithoutTopLogprobs(t *testing.T) {
	for _, block := range []string{
		`null`,
		`{}`,
		`{"tokens":["token_id:1","token_id:22"],"token_logprobs":[-0.5,null],"top_logprobs":[{"token_id:1":-0.5},null],"text_offset":[0,3]}`,
		`{"top_logprobs":[{"a":1},{"a":2,"a":3}]}`,
		`{"top_logprobs":[1]}`,
		`{"top_logprobs":[{"a":"b"}]}`,
		`{"top_logprobs":[{"a":1e40}]}`,
		`{"top_logprobs":[{"\xff":1}]}`,
		`{"top_logprobs":{"a":1}}`,
		`{"Top_Logprobs":[{"a":1}]}`,
		`{"top_logprobs":[{"a":1}],"top_logprobs":[{"b":2}]}`,
	} {
		leanLikeFull(t, block)
	}
}

func FuzzDecodeWithoutTopLogprobs(f *testing.F) {
	f.Add(`{"tokens":["token_id:1"],"token_logprobs":[-0.5],"top_logprobs":[{"token_id:1":-0.5}],"text_offset":[0]}`)
	f.Add(`{"top_logprobs":[null,{},{"x":-1}]}`)
	f.Fuzz(leanLikeFull)
}
