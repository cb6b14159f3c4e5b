package vllm

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// cachedLikeFormatted checks that the cache appends what formatting ids appends.
func cachedLikeFormatted(t *testing.T, pc *promptCache, ids []int32) {
	t.Helper()
	want := jsonscan.AppendInt32s([]byte(`{"a":`), ids)
	got := pc.appendIDs([]byte(`{"a":`), ids)
	require.Equal(t, string(want), string(got))
}

// TestPromptCacheLikeFormatted runs agents whose prompts grow turn by turn, and
// prompts that are the same, shorter, or differ in one id, through one cache, and
// changes each prompt after it was sent.
func TestPromptCacheLikeFormatted(t *testing.T) {
	var pc promptCache
	rng := rand.New(rand.NewPCG(3, 4))
	agents := make([][]int32, 5)
	for turn := range 300 {
		a := turn % len(agents)
		for range 1 + rng.IntN(20) {
			agents[a] = append(agents[a], int32(rng.IntN(200000)))
		}
		p := slices.Clone(agents[a])
		cachedLikeFormatted(t, &pc, p)
		cachedLikeFormatted(t, &pc, p)            // the same again
		cachedLikeFormatted(t, &pc, p[:len(p)/2]) // shorter
		if len(p) > 1 {
			q := slices.Clone(p)
			q[rng.IntN(len(q)-1)]++ // the same length and last id
			cachedLikeFormatted(t, &pc, q)
		}
		for i := range p {
			p[i] = -1 // the caller's slice, changed after the call
		}
	}
}

func TestPromptCacheConcurrent(t *testing.T) {
	var pc promptCache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var ids []int32
			for i := range 50 {
				ids = append(ids, int32(g*1000+i))
				want := jsonscan.AppendInt32s(nil, ids)
				if got := pc.appendIDs(nil, ids); string(got) != string(want) {
					t.Errorf("cache gave %s, want %s", got, want)
				}
			}
		})
	}
	wg.Wait()
}

func FuzzPromptCacheLikeFormatted(f *testing.F) {
	f.Add([]byte{1, 2, 3}, []byte{1, 2, 3, 4}, []byte{1, 2})
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		var pc promptCache
		for _, p := range [][]byte{a, b, c, a} {
			ids := make([]int32, len(p))
			for i, x := range p {
				ids[i] = int32(x) * 997
			}
			cachedLikeFormatted(t, &pc, ids)
		}
	})
}
