package atropos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

// A status reply that takes longer than the pause limit is a slow API, not a paused
// process: the heartbeat ran meanwhile, and the registration is kept.
func TestSlowReplyIsNotAPause(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	const limit = 300 * time.Millisecond
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) {
		c.PauseLimit, c.MaxCheckAge = limit, limit/6
	})
	ctx := context.Background()
	_, err := c.Status(ctx)
	require.NoError(t, err)
	srv.AddFault(atropostest.Fault{Path: "/status-env", Times: 1, Delay: 4 * limit})
	start := time.Now()
	_, err = c.Status(ctx)
	require.NoError(t, err)
	require.Greater(t, time.Since(start), limit, "the reply took longer than the pause limit")
	_, err = c.Status(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, group(1, 2)))
	require.Zero(t, c.Retired(), "a slow reply retired the registration")
	require.Len(t, srv.Envs(), 1, "registered once")
}

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
