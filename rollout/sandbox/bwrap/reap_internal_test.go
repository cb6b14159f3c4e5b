package bwrap

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// TestProbeFallsBackToBwrapAlone: where unshare cannot start bwrap (here a
// stand-in that always fails), the probe tries bwrap started directly and keeps
// that, so that the sandbox still works; where it can, unshare stays.
func TestProbeFallsBackToBwrapAlone(t *testing.T) {
	f, err := New(t.Context(), Config{})
	require.NoError(t, err)
	require.Equal(t, unsharePath, f.unshare, "unshare works here")

	f.unshare = "/bin/false"
	require.NoError(t, f.probeReaping(t.Context()))
	require.Empty(t, f.unshare, "bwrap is started directly")
	sb, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	res, err := sb.Run(t.Context(), rollout.Command{Shell: "echo ok"})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Stdout))

	f.unshare = unsharePath
	require.NoError(t, f.probeReaping(t.Context()))
	require.Equal(t, unsharePath, f.unshare)
}
