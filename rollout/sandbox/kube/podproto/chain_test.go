package podproto_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// makeChain makes a chain of n directories "d" below root, each of mode 000, by
// descriptors (two at a time), and registers its removal.
func makeChain(t testing.TB, root string, n int) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for range n {
		require.NoError(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Fchmod(next, 0))
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() { removeChain(root) })
}

// checkChain counts the directories of the chain below root that have the owner's
// rwx bits.
func checkChain(t testing.TB, root string) int {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	n := 0
	for {
		var st unix.Stat_t
		if unix.Fstatat(fd, "d", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			break
		}
		if st.Mode&0o700 != 0o700 {
			break
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return n
		}
		fd = next
		n++
	}
	unix.Close(fd)
	return n
}

// removeChain removes the chain below root: down to its end, then up by "..",
// unlinking as it goes.
func removeChain(root string) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	depth := 0
	for {
		_ = unix.Fchmodat(fd, "d", 0o700, 0)
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		unix.Close(fd)
		fd = next
		depth++
	}
	for ; depth > 0; depth-- {
		up, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return
		}
		fd = up
		_ = unix.Unlinkat(fd, "d", unix.AT_REMOVEDIR)
	}
	unix.Close(fd)
}
