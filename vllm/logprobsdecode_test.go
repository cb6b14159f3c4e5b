package vllm_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
)

// logprobsLikeJSON decodes a completion whose choice carries block as its logprobs
// member, and checks the result against encoding/json's decoding of the same block.
func logprobsLikeJSON(t *testing.T, block string) {
	var want *vllm.CompletionLogprobs
	wantErr := json.Unmarshal([]byte(block), &want)
	body := `{"choices":[{"index":0,"text":"x","logprobs":` + block + `}]}`
	resp, err := vllm.DecodeCompletionResponse([]byte(body))
	if wantErr != nil {
		require.Error(t, err, "%q: encoding/json refuses it (%v)", block, wantErr)
		return
	}
	if json.Valid([]byte(body)) {
		require.NoError(t, err, block)
		require.Equal(t, want, resp.Choices[0].Logprobs, block)
	}
}

func TestCompletionLogprobsDecode(t *testing.T) {
	for _, block := range []string{
		`null`,
		`{}`,
		`{"tokens":["token_id:1","token_id:22"],"token_logprobs":[-0.5,null],"top_logprobs":[{"token_id:1":-0.5},null],"text_offset":[0,3]}`,
		`{"tokens":["a\"b","\u00e9"],"token_logprobs":[-9999.0,-1e-3],"top_logprobs":null,"text_offset":null}`,
		`{"Tokens":["x"]}`,
		`{"tokens":["x"],"tokens":["y"]}`,
		`{"top_logprobs":[{"a":1},{"a":2,"a":3}]}`,
		`{"text_offset":[1.5]}`,
		`{"token_logprobs":[1e40]}`,
		`{"tokens":[1]}`,
		`{"tokens":[null],"text_offset":[null],"other":{"x":[1,2]}}`,
		`[]`,
		`{"tokens":["\xff"]}`,
	} {
		logprobsLikeJSON(t, block)
	}
}

func FuzzCompletionLogprobs(f *testing.F) {
	f.Add(`{"tokens":["token_id:1"],"token_logprobs":[-0.5],"top_logprobs":[{"token_id:1":-0.5}],"text_offset":[0]}`)
	f.Add(`{"tokens":null,"token_logprobs":[null],"top_logprobs":[null,{}]}`)
	f.Add(`{"TOKENS":[],"text_offset":[7]}`)
	f.Fuzz(logprobsLikeJSON)
}
