package atropos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

// A client that sent no request for longer than the pause limit registers again before
// its next post: nothing it saw is recent enough to trust, as after a pause.
func TestIdleClientRegistersAgain(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	const limit = 200 * time.Millisecond
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) {
		c.PauseLimit, c.MaxCheckAge = limit, limit/6
	})
	ctx := context.Background()
	require.NoError(t, c.Send(ctx, group(1, 2)))
	time.Sleep(3 * limit) // idle: the heartbeat stops after one limit
	require.NoError(t, c.Send(ctx, group(2, 2)))
	require.Equal(t, 1, c.Retired())
	require.Len(t, srv.Envs(), 2, "registered again after the idle gap")
	require.Equal(t, 1, c.Registration().EnvID)
}
