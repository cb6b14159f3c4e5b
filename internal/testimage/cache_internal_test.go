package testimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// fakeBuild writes a one-file root, counting its calls.
func fakeBuild(calls *atomic.Int32, hold time.Duration) func(context.Context, string) error {
	return func(ctx context.Context, dir string) error {
		calls.Add(1)
		time.Sleep(hold) // lets concurrent callers pile up on the lock
		if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "root", "marker"), []byte("built"), 0o644)
	}
}

func TestEnsureBuildsOnceForConcurrentCallers(t *testing.T) {
	base := t.TempDir()
	var calls atomic.Int32
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			d, err := ensure(context.Background(), base, "k", fakeBuild(&calls, 50*time.Millisecond))
			require.NoError(t, err)
			dirs[i] = d
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), calls.Load(), "builds")
	for _, d := range dirs {
		require.Equal(t, filepath.Join(base, "k", "root"), d)
	}
	fi, err := os.Stat(filepath.Join(base, "k"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the entry must be readable by a sandbox's uid")
	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"k", "k.lock"}, names, "no temporary build left")
}

func TestEnsureFailedBuildLeavesNothingFinished(t *testing.T) {
	base := t.TempDir()
	_, err := ensure(context.Background(), base, "k", func(ctx context.Context, dir string) error {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "root"), 0o755))
		return os.ErrInvalid
	})
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(base, "k"))
	require.True(t, os.IsNotExist(err), "a failed build must not be in place: %v", err)
	var calls atomic.Int32
	d, err := ensure(context.Background(), base, "k", fakeBuild(&calls, 0))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(d, "marker"))
}

// TestEnsureAfterBuilderKilled kills (SIGKILL) a process in the middle of a build, while
// it holds the lock: the lock must be free at once, the half-made directory must not
// count as a build, and the next build must remove it.
func TestEnsureAfterBuilderKilled(t *testing.T) {
	if os.Getenv("TESTIMAGE_CHILD_BASE") != "" {
		base := os.Getenv("TESTIMAGE_CHILD_BASE")
		_, _ = ensure(context.Background(), base, "k", func(ctx context.Context, dir string) error {
			_ = os.MkdirAll(filepath.Join(dir, "root"), 0o755)
			_ = os.WriteFile(filepath.Join(base, "building"), nil, 0o644)
			select {} // killed here
		})
		return
	}
	base := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnsureAfterBuilderKilled$")
	cmd.Env = append(os.Environ(), "TESTIMAGE_CHILD_BASE="+base)
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(time.Minute) // a failure guard only
	for {
		if _, err := os.Stat(filepath.Join(base, "building")); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the child never started building")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	stale, err := filepath.Glob(filepath.Join(base, "k.build-*"))
	require.NoError(t, err)
	require.Len(t, stale, 1, "the killed build's directory")

	var calls atomic.Int32
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	d, err := ensure(ctx, base, "k", fakeBuild(&calls, 0))
	require.NoError(t, err, "the lock must be free once its holder is dead")
	require.FileExists(t, filepath.Join(d, "marker"))
	stale, err = filepath.Glob(filepath.Join(base, "k.build-*"))
	require.NoError(t, err)
	require.Empty(t, stale, "the next build removes what the killed one left")
}

func TestBuildWithoutMmdebstrapNamesTheInstallCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := build(context.Background(), t.TempDir(), Bookworm)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), InstallHint), err.Error())
}
