package vllm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendPromptMatchesEncodingJSON checks the hand-written prompt member against
// encoding/json on flat and batched prompts, extreme ids included.
func TestAppendPromptMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		prompts := make([][]int32, 1+trial%3)
		for i := range prompts {
			p := make([]int32, 1+rng.IntN(50))
			for j := range p {
				p[j] = int32(rng.Uint32())
			}
			p[0] = []int32{0, math.MaxInt32, math.MinInt32, -1, 151643}[trial%5]
			prompts[i] = p
		}
		obj := []byte(`{"model":"m","n":1}`)
		got := appendPrompt(obj, prompts, nil)
		var want any = prompts
		if len(prompts) == 1 {
			want = prompts[0]
		}
		wantJSON, err := json.Marshal(map[string]any{"model": "m", "n": 1, "prompt": want})
		require.NoError(t, err)
		require.JSONEq(t, string(wantJSON), string(got))
	}
	require.JSONEq(t, `{"prompt":[5]}`, string(appendPrompt([]byte(`{}`), [][]int32{{5}}, nil)))
}
