package vllm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPromptJSONLikeEncodingJSON(t *testing.T) {
	for _, b := range [][][]int32{{{0}}, {{1, -2, 2147483647, -2147483648}}, {{5, 6}, {7}}, {{}}} {
		want, err := json.Marshal(b)
		require.NoError(t, err)
		got, err := json.Marshal(promptBatch(b))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
		want, err = json.Marshal(b[0])
		require.NoError(t, err)
		got, err = json.Marshal(promptIDs(b[0]))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}
