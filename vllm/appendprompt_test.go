package vllm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
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
		got := appendPrompt(obj, prompts)
		var want any = prompts
		if len(prompts) == 1 {
			want = prompts[0]
		}
		wantJSON, err := json.Marshal(map[string]any{"model": "m", "n": 1, "prompt": want})
		require.NoError(t, err)
		require.JSONEq(t, string(wantJSON), string(got))
	}
	require.JSONEq(t, `{"prompt":[5]}`, string(appendPrompt([]byte(`{}`), [][]int32{{5}})))
}

// TestAppendIDMatchesStrconv checks appendID against strconv on every id below 2·10⁶,
// on a sample up to 10⁸, and on the edges of each length and of the int32 range.
func TestAppendIDMatchesStrconv(t *testing.T) {
	check := func(v int32) {
		if got, want := string(appendID([]byte("x"), v)), "x"+strconv.Itoa(int(v)); got != want {
			t.Fatalf("appendID(%d) = %q, want %q", v, got, want)
		}
	}
	for v := range int32(2_000_000) {
		check(v)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1_000_000 {
		check(rng.Int32N(100_000_000))
	}
	for p := int32(1); p <= 1e9; p *= 10 {
		check(p - 1)
		check(p)
		check(-p)
	}
	for _, v := range []int32{math.MaxInt32, math.MinInt32, 99_999_999, 100_000_000} {
		check(v)
	}
}
