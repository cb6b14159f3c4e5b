package rollout_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// TestWithSeedSeedsEveryGeneration: a run under WithSeed sends its seed with every
// generation request; a run without sends none.
func TestWithSeedSeedsEveryGeneration(t *testing.T) {
	for name, c := range map[string]struct {
		ctx  context.Context
		want *int64
	}{
		"seeded":   {rollout.WithSeed(context.Background(), 42), ptr(int64(42))},
		"unseeded": {context.Background(), nil},
	} {
		t.Run(name, func(t *testing.T) {
			p := &fakePolicy{script: scripted(fixScript...)}
			a, err := rollout.NewAgent(p, rollout.Config{})
			require.NoError(t, err)
			tr, err := a.Run(c.ctx, startMessages, newTempSandbox(t))
			require.NoError(t, err)
			require.Greater(t, tr.TurnsUsed, 1)
			require.Len(t, p.lastReqs, tr.TurnsUsed)
			for i, req := range p.lastReqs {
				assert.Equal(t, c.want, req.Seed, "turn %d", i)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
