package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
)

var _ rollout.Restorer = (*Sandbox)(nil)

// restoreMode is the mode bits Restore keeps.
const restoreMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// RestoreTimeout bounds the time one [Sandbox.Restore] may take. Its walk is linear
// in the workspace's entries (a chain of 100,000 directories or 100,000 files takes
// well under a second of host CPU, see the package doc), so only a host that stalls
// on what the agent made comes near it.
const RestoreTimeout = 30 * time.Second

// Restore implements [rollout.Restorer]: it gives the workspace's owner (the sandbox
// uid) back what the sandboxed code took from it, as chmod -R u+rwX would: the
// workspace and every directory in it get the owner's read, write and search bits,
// every regular file the owner's read and write bits; other bits are kept. It runs on
// the host by directory descriptors from the workspace's [os.Root], so a planted
// symlink leads nowhere (symlinks are not followed, FIFOs, sockets and devices are
// left alone), its work grows linearly with the workspace's entries whatever their
// depth, and it visits at most [MaxWorkspaceEntries] entries. An entry it cannot
// change is left as it is.
//
// The error is for the workspace's root, or ctx's, or, wrapping
// [rollout.ErrRestoreBudget], for a walk that did not end within [RestoreTimeout]:
// what the workspace holds made it too slow, which only the agent's actions can
// cause, so a verifier scores that as the solution's fault.
//
// Nothing else needs restoring: /tmp and /dev/shm are private to each command and
// end with it, and so does every process the command started. What a full tmpfs
// workspace holds is memory charged to the sandbox and stays: such a sandbox's next
// command meets its memory limit ([Result.MemoryLimitHit]). Restore must not be
// called while a command runs.
func (s *Sandbox) Restore(ctx context.Context) error {
	return s.restore(ctx, RestoreTimeout)
}

// restore is Restore with its time budget.
func (s *Sandbox) restore(ctx context.Context, budget time.Duration) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	fi, err := s.root.Stat(".")
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	if err := s.root.Chmod(".", fi.Mode()&restoreMode|0o700); err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	root, err := s.root.Open(".")
	if err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	defer root.Close()
	walkCtx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	check := func() error { return walkCtx.Err() }
	_, err = walkTree(root, MaxWorkspaceEntries, check, restoreEntry)
	switch {
	case err == nil, errors.Is(err, errWalkEntries):
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("sandbox: restore: %w", ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("sandbox: restore: the walk of the workspace did not end within %s: %w", budget, rollout.ErrRestoreBudget)
	}
	return fmt.Errorf("sandbox: restore: %w", err)
}

// restoreEntry gives the owner of a directory its read, write and search bits, of a
// regular file its read and write bits, and walks into directories.
func restoreEntry(dir int, name string, typ uint8) (bool, error) {
	if typ != unix.DT_DIR && typ != unix.DT_REG && typ != unix.DT_UNKNOWN {
		return false, nil // a symlink, FIFO, socket or device
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false, nil
	}
	var want uint32
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		want = 0o700
	case unix.S_IFREG:
		want = 0o600
	default:
		return false, nil
	}
	if mode := st.Mode & 0o7777; mode&want != want {
		_ = chmodNoFollow(dir, name, mode|want)
	}
	return want == 0o700, nil
}
