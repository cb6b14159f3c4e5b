package vllm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestCheckTopKAgainstMaxLogprobs(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(20))
	c := sim.Client()
	ctx := context.Background()
	require.NoError(t, vllm.CheckTopK(ctx, c, 20))

	err := vllm.CheckTopK(ctx, c, 21)
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	var me *vllm.MaxLogprobsError
	require.True(t, errors.As(err, &me))
	require.Equal(t, 20, me.Max)
	require.EqualError(t, err, "vllm: a top-K of 21 is more than the teacher server's --max-logprobs 20: "+
		"start it with --max-logprobs 21 or more, or lower the top-K to at most 20")

	pool, err := vllm.NewPool([]string{sim.URL})
	require.NoError(t, err)
	defer pool.Close()
	require.ErrorIs(t, vllm.CheckTopK(ctx, pool, 21), vllm.ErrMaxLogprobs, "a pool is checked the same way")

	err = vllm.CheckTopK(ctx, c, 0)
	require.ErrorIs(t, err, scorer.ErrInvalidRequest, "other failures come back as Score gives them")
	require.NotErrorIs(t, err, vllm.ErrMaxLogprobs)
	require.ErrorContains(t, err, "checking a top-K of 0")
}
