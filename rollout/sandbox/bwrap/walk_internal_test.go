package bwrap

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
)

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// comb makes below dir a chain of depth directories "d", each holding besides the
// next one a directory "a" with a file "f" in it, every directory and file of mode
// 000 when closed is set. It returns how many entries it made. A walk that takes
// "d" before "a" (it does: it takes a directory's subdirectories last name first)
// has every level of the chain waiting on the stack, so it must close and reopen
// them. removeTree removes it.
func comb(t *testing.T, dir string, depth int, closed bool) int {
	t.Helper()
	fd, err := unix.Open(dir, dirFlags, 0)
	require.NoError(t, err)
	mode := uint32(0o700)
	if closed {
		mode = 0
	}
	for range depth {
		require.NoError(t, unix.Mkdirat(fd, "a", 0o700))
		a, err := unix.Openat(fd, "a", dirFlags, 0)
		require.NoError(t, err)
		f, err := unix.Openat(a, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		require.NoError(t, err)
		require.NoError(t, unix.Fchmod(f, mode&0o600))
		unix.Close(f)
		require.NoError(t, unix.Fchmod(a, mode))
		unix.Close(a)
		require.NoError(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", dirFlags, 0)
		unix.Close(fd)
		require.NoError(t, err)
		fd = next
		require.NoError(t, unix.Fchmod(fd, mode))
	}
	unix.Close(fd)
	return 3 * depth
}

// scratch returns an empty directory for a test's tree: a tmpfs mounted for the
// test when it runs as root (unmounting it removes the tree at once), else a
// temporary directory removed by removeTree (t.TempDir's os.RemoveAll holds a
// descriptor per level).
func scratch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=256m,nr_inodes=400000,mode=0700") == nil {
		t.Cleanup(func() { require.NoError(t, unix.Unmount(dir, unix.MNT_DETACH)) })
		return dir
	}
	t.Cleanup(func() { require.NoError(t, removeTree(dir)) })
	return dir
}

// denied walks the tree below dir and counts its entries, and those that lack an
// owner's bit Restore gives (rwx for a directory, rw for a file).
func denied(t *testing.T, dir string) (entries, denied int) {
	t.Helper()
	root, err := os.Open(dir)
	require.NoError(t, err)
	defer root.Close()
	st, err := walkTree(root, MaxWorkspaceEntries, nil, func(dir int, name string, _ uint8) (bool, error) {
		var st unix.Stat_t
		require.NoError(t, unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW))
		want := uint32(0o600)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			want = 0o700
		}
		if st.Mode&want != want {
			denied++
		}
		return want == 0o700, nil
	})
	require.NoError(t, err)
	return st.entries, denied
}

// TestWalkTreeDeepChain: a chain of 99,999 directories of mode 000 is restored with
// one open per level, no reopening, and a few descriptors.
func TestWalkTreeDeepChain(t *testing.T) {
	dir := scratch(t)
	const depth = MaxWorkspaceEntries - 1
	fd, err := unix.Open(dir, dirFlags, 0)
	require.NoError(t, err)
	for range depth {
		require.NoError(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", dirFlags, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Fchmod(fd, 0))
		unix.Close(fd)
		fd = next
	}
	require.NoError(t, unix.Fchmod(fd, 0))
	unix.Close(fd)

	root, err := os.Open(dir)
	require.NoError(t, err)
	defer root.Close()
	st, err := walkTree(root, MaxWorkspaceEntries, nil, restoreEntry)
	require.NoError(t, err)
	require.Equal(t, walkStats{entries: depth, opens: depth, maxOpen: 3, steps: st.steps}, st)
	require.LessOrEqual(t, st.steps, 3*depth+1)
	n, bad := denied(t, dir)
	require.Equal(t, depth, n)
	require.Zero(t, bad, "every directory of the chain is the owner's again")
}

// TestWalkTreeComb: a chain whose every level waits on the stack (a sibling still to
// visit) holds no more than walkOpenDirs descriptors: the levels past that are closed
// and reopened by "..", each reopening resolving the levels just come back up, so
// the work stays linear; and every entry is restored.
func TestWalkTreeComb(t *testing.T) {
	dir := scratch(t)
	const depth = 30000
	entries := comb(t, dir, depth, true)

	root, err := os.Open(dir)
	require.NoError(t, err)
	defer root.Close()
	st, err := walkTree(root, MaxWorkspaceEntries, nil, restoreEntry)
	require.NoError(t, err)
	require.Equal(t, entries, st.entries)
	require.Equal(t, 2*depth, st.opens, "each directory opened once")
	require.LessOrEqual(t, st.maxOpen, walkOpenDirs+3)
	require.Greater(t, st.reopens, depth-walkOpenDirs-2, "the closed levels were reopened")
	require.LessOrEqual(t, st.reopens, depth)
	require.LessOrEqual(t, st.dotdots, 2*st.reopens, "each reopening comes up from the level just left")
	require.LessOrEqual(t, st.steps, 2*entries+1)
	n, bad := denied(t, dir)
	require.Equal(t, entries, n)
	require.Zero(t, bad)
}

// TestWalkTreeRandom: random trees, up to 600 levels deep and with directories of
// one to three entries, some of mode 000, are walked whole: every entry seen, every
// directory opened once, each reopening paid for by the levels come back up, the
// descriptors bounded, every entry restored.
func TestWalkTreeRandom(t *testing.T) {
	for seed := range 4 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := scratch(t)
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			dirs, entries := 0, 0
			var gen func(fd, depth int)
			gen = func(fd, depth int) {
				n := 1 + rng.IntN(3)
				if depth == 0 {
					n = 3 // and directories: the tree is not a leaf
				}
				for i := range n {
					if dirs >= 20000 {
						return
					}
					name := fmt.Sprint("e", i)
					entries++
					if depth >= 600 || depth > 0 && rng.IntN(10) >= 7 {
						f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0)
						require.NoError(t, err)
						unix.Close(f)
						continue
					}
					require.NoError(t, unix.Mkdirat(fd, name, 0o700))
					child, err := unix.Openat(fd, name, dirFlags, 0)
					require.NoError(t, err)
					dirs++
					gen(child, depth+1)
					if rng.IntN(2) == 0 {
						require.NoError(t, unix.Fchmod(child, 0))
					}
					unix.Close(child)
				}
			}
			fd, err := unix.Open(dir, dirFlags, 0)
			require.NoError(t, err)
			gen(fd, 0)
			unix.Close(fd)

			root, err := os.Open(dir)
			require.NoError(t, err)
			defer root.Close()
			st, err := walkTree(root, MaxWorkspaceEntries, nil, restoreEntry)
			require.NoError(t, err)
			t.Logf("%d directories, %d entries: %+v", dirs, entries, st)
			require.Equal(t, entries, st.entries)
			require.Equal(t, dirs, st.opens)
			require.LessOrEqual(t, st.reopens, dirs)
			require.LessOrEqual(t, st.dotdots, 2*dirs)
			require.LessOrEqual(t, st.maxOpen, walkOpenDirs+3)
			n, bad := denied(t, dir)
			require.Equal(t, entries, n)
			require.Zero(t, bad)
		})
	}
}

// TestWalkTreeChangedUnderIt: when the tree changes under the walk (a subtree
// moved up while the walk is deep inside it), a directory reopened by ".." is not
// the one the walk left, and the walk gives it up: it never lists a directory
// outside the tree, and it ends.
func TestWalkTreeChangedUnderIt(t *testing.T) {
	base := scratch(t)
	dir := filepath.Join(base, "ws")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside"), nil, 0o600))
	const depth = 2000
	comb(t, dir, depth, false)
	// The chain's directory at level 999, whose "d" is moved to the top.
	parent := dir
	for range 999 {
		parent = filepath.Join(parent, "d")
	}
	pfd, err := unix.Open(parent, dirFlags, 0)
	require.NoError(t, err)
	defer unix.Close(pfd)

	root, err := os.Open(dir)
	require.NoError(t, err)
	defer root.Close()
	moved := false
	st, err := walkTree(root, MaxWorkspaceEntries, nil, func(_ int, name string, _ uint8) (bool, error) {
		require.NotEqual(t, "outside", name, "the walk lists only directories of the tree")
		// The walk takes "d" before "a", so the first "f" it lists is at the
		// bottom of the chain.
		if name == "f" && !moved {
			require.NoError(t, unix.Renameat(pfd, "d", int(root.Fd()), "moved"))
			moved = true
		}
		return name == "d" || name == "a", nil
	})
	require.NoError(t, err)
	require.True(t, moved)
	// Levels 1 to 999 were given up: their "a" was never opened.
	require.Equal(t, 2*depth-999, st.opens)
	t.Logf("after the move: %+v", st)
}

// TestRemoveTree: removeTree removes a chain of 99,999 directories of mode 000, and
// a comb whose every level has a directory and a file besides, holding no
// descriptor afterwards.
func TestRemoveTree(t *testing.T) {
	base := scratch(t)
	chain, combed := filepath.Join(base, "chain"), filepath.Join(base, "comb")
	require.NoError(t, os.Mkdir(chain, 0o700))
	require.NoError(t, os.Mkdir(combed, 0o700))
	fd, err := unix.Open(chain, dirFlags, 0)
	require.NoError(t, err)
	for range MaxWorkspaceEntries - 1 {
		require.NoError(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", dirFlags, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Fchmod(fd, 0))
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	comb(t, combed, 30000, true)
	require.NoError(t, unix.Chmod(combed, 0))

	before := openFDs(t)
	require.NoError(t, removeTree(chain))
	require.NoError(t, removeTree(combed))
	require.Equal(t, before, openFDs(t), "no descriptor left open")
	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.NoError(t, removeTree(filepath.Join(base, "gone")), "a tree already gone is no error")
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestRestoreBudget: a Restore whose walk does not end within its time bound fails
// with rollout.ErrRestoreBudget; one whose ctx ends fails with ctx's error instead.
func TestRestoreBudget(t *testing.T) {
	f, err := New(t.Context(), Config{})
	require.NoError(t, err)
	s, err := f.create(t.Context(), nil)
	require.NoError(t, err)
	defer s.Close()
	comb(t, s.HostDir(), 2*walkCheckSteps, true)

	err = s.restore(t.Context(), time.Nanosecond)
	require.ErrorIs(t, err, rollout.ErrRestoreBudget)
	t.Log(err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = s.restore(ctx, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, rollout.ErrRestoreBudget))

	require.NoError(t, s.Restore(t.Context()))
	n, bad := denied(t, s.HostDir())
	require.Equal(t, 3*2*walkCheckSteps, n)
	require.Zero(t, bad)
}
