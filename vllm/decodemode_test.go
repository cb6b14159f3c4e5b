package vllm

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
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

// inPlaceLikeSkipped checks that a logprobs block read in place, from a document held
// whole, gives in both modes what reading its bytes taken by Skip gives (a streaming
// scanner's way), and fails exactly when that fails.
func inPlaceLikeSkipped(t *testing.T, block string) {
	t.Helper()
	doc := []byte(`{"logprobs":` + block + `}`)
	for _, mode := range []decodeMode{decodeAll, decodeNoTopLogprobs} {
		var want, got *CompletionLogprobs
		ws := jsonscan.NewStream(bytes.NewReader(doc), 0)
		wantErr := ws.Object(false, func([]byte) error { return decodeCompletionLogprobs(ws, &want, mode) })
		s := &jsonscan.Scanner{Data: doc}
		err := s.Object(false, func([]byte) error { return decodeCompletionLogprobs(s, &got, mode) })
		if wantErr != nil {
			require.Error(t, err, "%q: the skipping decoder refuses it (%v)", block, wantErr)
			continue
		}
		require.NoError(t, err, block)
		require.Equal(t, want, got, block)
		require.Equal(t, ws.Offset(), s.Pos, block)
	}
}

func TestLogprobsInPlaceLikeSkipped(t *testing.T) {
	for _, block := range []string{
		`null`,
		`{}`,
		`{"tokens":["token_id:1","token_id:22"],"token_logprobs":[-0.5,null],"top_logprobs":[{"token_id:1":-0.5},null],"text_offset":[0,3]}`,
		`{"tokens":["a"],"other":{"x":[1,{"y":2}]}}`,
		`{"Tokens":["a"]}`,
		`{"tokens":["a"],"tokens":["b"]}`,
		`{"top_logprobs":[{"a":1e40}]}`,
		`{"top_logprobs":[{"a":340282356779733661637539395458142568448}]}`,
		`{"top_logprobs":[{"a":-340282356779733661637539395458142568448.5}]}`,
		`{"top_logprobs":[{"a":99999999999999999999999999999999999999.9}]}`,
		`{"top_logprobs":[{"a":-0.000000000000000000000000000000000000000000000000001}]}`,
		`{"top_logprobs":[{"a":1E3,"b":-2e-3}]}`,
		`{"top_logprobs":[{"a":01}]}`,
		`{"top_logprobs":[{"a":"1"}]}`,
		`{"token_logprobs":[1e40]}`,
		`{"tokens":["\xff"]}`,
		`{"tokens":["a"]`,
		`{"tokens":["a"]}}`,
		`[1]`,
		`"x"`,
	} {
		inPlaceLikeSkipped(t, block)
	}
}

func FuzzLogprobsInPlaceLikeSkipped(f *testing.F) {
	f.Add(`{"tokens":["token_id:1"],"token_logprobs":[-0.5],"top_logprobs":[{"token_id:1":-0.5}],"text_offset":[0]}`)
	f.Add(`{"top_logprobs":[{"a":1e40}]}`)
	f.Add(`{"top_logprobs":[{"a":-12345678901234567890123456789012345678.25}]}`)
	f.Fuzz(inPlaceLikeSkipped)
}
