package vllmtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestRealClient(t *testing.T) {
	s := vllmtest.NewServer(t)
	c := s.Client()
	ctx := context.Background()

	v, err := c.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, vllmtest.DefaultVersion, v)
	require.NoError(t, c.Health(ctx))

	r, err := c.Render(ctx, rollout.RenderRequest{
		Messages:            []chat.Message{{Role: chat.RoleUser, Content: "Hi"}},
		AddGenerationPrompt: true,
	})
	require.NoError(t, err)
	require.Equal(t, s.Tokenize("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), r.Tokens)

	seed := int64(3)
	g, err := c.Generate(ctx, rollout.GenerateRequest{Prompt: r.Tokens, MaxTokens: 20, Sampling: sampling.Neutral(1), Seed: &seed})
	require.NoError(t, err)
	require.NotEmpty(t, g.Tokens)
	require.Len(t, g.Logprobs, len(g.Tokens))

	seq := append(append([]int32(nil), r.Tokens...), g.Tokens...)
	positions := make([]int, len(g.Tokens))
	for i := range positions {
		positions[i] = len(r.Tokens) + i
	}
	res, err := c.Score(ctx, scorer.Request{K: 5, Sequences: []scorer.Sequence{{Tokens: seq, Positions: positions}}})
	require.NoError(t, err)
	require.Len(t, res.Sequences, 1)
	// the same model scores the sampled ids with the logprobs it sampled them at
	require.Equal(t, g.Logprobs, res.Sequences[0].TokenLogprobs)
	for i := range positions {
		ids, lps := res.Sequences[0].Top(i)
		require.Len(t, ids, 5)
		for k := 1; k < len(lps); k++ {
			require.LessOrEqual(t, lps[k], lps[k-1])
		}
	}
}
