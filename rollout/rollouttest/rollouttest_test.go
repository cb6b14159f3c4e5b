package rollouttest_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func newSandbox(t *testing.T, cfg bwrap.Config) *bwrap.Sandbox {
	t.Helper()
	f, err := bwrap.New(context.Background(), cfg)
	require.NoError(t, err)
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	return sb.(*bwrap.Sandbox)
}

func TestRunBubblewrap(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox { return newSandbox(t, bwrap.Config{}) })
}

func TestRunUnconfined(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox { return newSandbox(t, unconfined()) })
}

// naive reads files by host path, following ".." and symlinks out of the workspace.
type naive struct{ *bwrap.Sandbox }

func (n naive) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(n.HostDir(), name))
}

func TestSandboxFindsEscapes(t *testing.T) {
	sb := newSandbox(t, unconfined())
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(sb.HostDir()), "outside.txt"), []byte("x"), 0o644))
	err := rollouttest.TestSandbox(context.Background(), naive{sb})
	require.Error(t, err)
	require.ErrorContains(t, err, "paths stay in the workspace")
	require.ErrorContains(t, err, "ReadFile followed a symlink out of the workspace")
	require.ErrorContains(t, err, `ReadFile("../outside.txt") succeeded`)
	require.NotContains(t, err.Error(), "files round trip")
}

func TestSandboxPasses(t *testing.T) {
	require.NoError(t, rollouttest.TestSandbox(context.Background(), newSandbox(t, unconfined())))
}

// unconfined runs as its own host uid when the tests run as root: RLIMIT_NPROC of an
// unconfined sandbox counts every process of its uid on the host, and bubblewrap
// sandboxes of tests running in parallel (other packages included) run as the default
// uid.
func unconfined() bwrap.Config {
	return bwrap.Config{Unconfined: true, UID: 65533, GID: 65533}
}

// reopening answers Run after Close as if nothing happened.
type reopening struct {
	*bwrap.Sandbox
	closed atomic.Bool
}

func (r *reopening) Close() error { r.closed.Store(true); return r.Sandbox.Close() }

func (r *reopening) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	if r.closed.Load() {
		return rollout.CommandResult{}, nil
	}
	return r.Sandbox.Run(ctx, c)
}

func TestSandboxFindsRunAfterClose(t *testing.T) {
	err := rollouttest.TestSandbox(context.Background(), &reopening{Sandbox: newSandbox(t, unconfined())})
	require.ErrorContains(t, err, "close kills running commands: Run after Close succeeded")
}

// stdinDropper starts commands after silently dropping Command.Stdin.
type stdinDropper struct{ *bwrap.Sandbox }

func (s stdinDropper) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	c.Stdin = nil
	return s.Sandbox.Start(ctx, c)
}

func TestSandboxFindsABrokenStarter(t *testing.T) {
	err := rollouttest.TestSandbox(context.Background(), stdinDropper{newSandbox(t, bwrap.Config{})})
	require.ErrorContains(t, err, "Start accepted Command.Stdin")
}
