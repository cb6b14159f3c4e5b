package bwrap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// TestProbeFallsBackToBwrapAlone: where bwrap cannot run in the namespaces the
// library makes for it (here a stand-in for bwrap that fails as the init of a pid
// namespace), the probe tries bwrap started directly and keeps that, so that the
// sandbox still works; where it can, the library's namespaces stay.
func TestProbeFallsBackToBwrapAlone(t *testing.T) {
	f, err := New(t.Context(), Config{})
	require.NoError(t, err)
	ownNS, unshare := f.ownNS, f.unshare
	require.True(t, ownNS || unshare != "", "bwrap starts in a pid namespace of its own here")
	require.Equal(t, os.Geteuid() == 0, ownNS, "the library makes the namespace as root, unshare(1) without")

	// Outside t.TempDir, which the sandbox uid cannot enter.
	dir, err := os.MkdirTemp("", "agenticopd-stub-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	stub := filepath.Join(dir, "bwrap")
	require.NoError(t, os.WriteFile(stub, []byte("#!/bin/sh\n[ $$ != 1 ] || exit 1\nexec "+DefaultBwrapPath+" \"$@\"\n"), 0o755))

	f.cfg.BwrapPath = stub
	require.NoError(t, f.probeReaping(t.Context()))
	require.False(t, f.ownNS, "bwrap is started directly")
	require.Empty(t, f.unshare, "bwrap is started directly")
	sb, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	res, err := sb.Run(t.Context(), rollout.Command{Shell: "echo ok"})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Stdout))

	f.cfg.BwrapPath = DefaultBwrapPath
	f.ownNS, f.unshare = ownNS, unshare
	require.NoError(t, f.probeReaping(t.Context()))
	require.Equal(t, ownNS, f.ownNS)
	require.Equal(t, unshare, f.unshare)
}
