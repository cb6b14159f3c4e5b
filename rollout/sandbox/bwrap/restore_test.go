package bwrap_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// TestRestoreDeepChain: one command of the agent builds a chain of 99,999
// directories, taking every one's permissions away as it goes down (and the
// workspace's). Restore gives every level back, and the next command runs. The
// walk is linear in the depth (the work it does is counted in the package's own
// tests; BenchmarkRestoreDeepChain carries the figure): a walk by paths resolved
// from the workspace's root at every level did not end within minutes.
func TestRestoreDeepChain(t *testing.T) {
	sb := newSandbox(t, newFactory(t, bwrap.Config{}))
	const depth = bwrap.MaxWorkspaceEntries - 1
	res, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: `python3 -c "
import os
for _ in range(99999):
    os.mkdir('` + chainName + `')
    os.chdir('` + chainName + `')
    os.chmod('..', 0)
os.chmod('.', 0)
"`, Timeout: 5 * time.Minute})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
	_, err = sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"true"}, Timeout: 20 * time.Second})
	require.Error(t, err, "the workspace is unusable before Restore")

	require.NoError(t, sb.Restore(t.Context()))
	n, denied := chainModes(t, sb.HostDir())
	require.Equal(t, depth, n)
	require.Zero(t, denied, "every level of the chain is the owner's again")
	res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "cd " + filepath.Join(chainName, chainName) + " && echo ok", Timeout: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Stdout), "stderr %s", res.Stderr)
}

// TestQuotaWalkDeepChain: the quota walk of a walked workspace ([bwrap.StorageWalk])
// reaches the bottom of a deep chain of directories (a file there puts the
// workspace over its quota, and the command that finds it is marked), and after the
// file is gone the next command runs within its quota.
func TestQuotaWalkDeepChain(t *testing.T) {
	f := newFactory(t, bwrap.Config{DisableWorkspaceMount: true, DiskQuota: 4 << 20})
	require.Equal(t, bwrap.StorageWalk, f.Enforcement().Storage)
	sb := newSandbox(t, f)
	const depth = 10000
	makeChain(t, sb.HostDir(), depth, 0o755)
	bottom := onChain(t, sb.HostDir(), depth)
	fd, err := unix.Openat(bottom, "big", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	require.NoError(t, err)
	require.NoError(t, unix.Ftruncate(fd, 8<<20))
	unix.Close(fd)

	res, err := sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"true"}, Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.DiskQuotaExceeded, "the file at the bottom counts: stderr %s", res.Stderr)

	require.NoError(t, unix.Unlinkat(bottom, "big", 0))
	unix.Close(bottom)
	res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "echo hi", Timeout: time.Minute})
	require.NoError(t, err)
	require.False(t, res.DiskQuotaExceeded)
	require.Equal(t, "hi\n", string(res.Stdout))
}

// TestCloseDeepChain: a walked workspace (on the disk of Config.BaseDir) in which
// the agent built a chain of 99,999 directories of mode 000 is removed by Close,
// with no error and nothing left (os.RemoveAll, which Close used, holds a
// descriptor per level: past the process's limit it failed and left the chain).
func TestCloseDeepChain(t *testing.T) {
	f := newFactory(t, bwrap.Config{DisableWorkspaceMount: true})
	require.Equal(t, bwrap.StorageWalk, f.Enforcement().Storage)
	s, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	sb := s.(*bwrap.Sandbox)
	res, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: `python3 -c "
import os
for _ in range(99999):
    os.mkdir('` + chainName + `')
    os.chdir('` + chainName + `')
    os.chmod('..', 0)
os.chmod('.', 0)
"`, Timeout: 5 * time.Minute})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
	require.False(t, res.DiskQuotaExceeded)
	dir := filepath.Dir(sb.HostDir())
	require.NoError(t, sb.Close())
	_, err = os.Lstat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist, "the sandbox's directory is gone")
}

// onChain opens the directory depth levels down the chain below dir.
func onChain(t *testing.T, dir string, depth int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for range depth {
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		require.NoError(t, err)
		fd = next
	}
	return fd
}
