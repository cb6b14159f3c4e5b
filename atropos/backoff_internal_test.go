package atropos

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// TestBackoffBounds checks the wait after every attempt stays within [MinBackoff/2,
// MaxBackoff], also for long outages and minimums whose doubling would overflow.
func TestBackoffBounds(t *testing.T) {
	tests := []RetryConfig{
		{MinBackoff: 500 * time.Millisecond, MaxBackoff: 10 * time.Second},
		{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		{MinBackoff: 1<<34 + 1, MaxBackoff: time.Hour}, // << 30 wraps to about 1s
		{MinBackoff: time.Minute, MaxBackoff: 24 * time.Hour},
	}
	for _, r := range tests {
		for attempt := 1; attempt <= 100; attempt++ {
			for range 20 {
				w := backoff(r, attempt)
				if w < r.MinBackoff/2 || w > r.MaxBackoff {
					t.Fatalf("%+v attempt %d: wait %v outside [%v, %v]", r, attempt, w, r.MinBackoff/2, r.MaxBackoff)
				}
			}
		}
	}
}

// TestPauseSeesTheAPIDown: while a retry waits after a failure that made the
// registration suspect, the client looks at the API. A refused connection marks the
// registration lost at once and ends the wait (an hour here), instead of leaving the
// next attempt to verify an API that may be back by then, with this env's id given
// to another env.
func TestPauseSeesTheAPIDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there: connections are refused
	c, err := NewClient("http://"+addr, ClientConfig{EnvName: "env", GroupSize: 2, SpoolDir: t.TempDir(),
		StatusInterval: time.Millisecond})
	require.NoError(t, err)
	setState := func(st regState) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.reg, c.epoch, c.state = &Registration{EnvID: 0}, 1, st
	}

	// A registration that stands is not looked at: the wait is a plain sleep.
	setState(regCurrent)
	require.NoError(t, c.pause(testctx.Context(t), 20*time.Millisecond, true, 1))
	require.Equal(t, regCurrent, c.stateOf(1))

	setState(regSuspect)
	require.NoError(t, c.pause(testctx.Context(t), time.Hour, true, 1), "the wait ends once the API is seen down")
	require.Equal(t, regLost, c.stateOf(1))
	require.Equal(t, regLost, c.stateOf(2), "another registration replaced this one")
}
