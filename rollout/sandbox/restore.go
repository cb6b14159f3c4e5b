package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"path"

	"github.com/agentic-opd/agenticopd/rollout"
)

var _ rollout.Restorer = (*Sandbox)(nil)

// restoreMode is the mode bits Restore keeps.
const restoreMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Restore implements [rollout.Restorer]: it gives the workspace's owner (the sandbox
// uid) back what the sandboxed code took from it, as chmod -R u+rwX would: the
// workspace and every directory in it get the owner's read, write and search bits,
// every regular file the owner's read and write bits; other bits are kept. It runs on
// the host through the workspace's [os.Root], so a planted symlink leads nowhere
// (symlinks are not followed, FIFOs, sockets and devices are left alone), and it
// visits at most [MaxWorkspaceEntries] entries. An entry it cannot change is left as
// it is; the error is for the workspace's root only, or ctx.
//
// Nothing else needs restoring: /tmp and /dev/shm are private to each command and
// end with it, and so does every process the command started. What a full tmpfs
// workspace holds is memory charged to the sandbox and stays: such a sandbox's next
// command meets its memory limit ([Result.MemoryLimitHit]). Restore must not be
// called while a command runs.
func (s *Sandbox) Restore(ctx context.Context) error {
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
	seen := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		f, err := s.root.Open(dir)
		if err != nil {
			return nil
		}
		entries, _ := f.ReadDir(-1)
		f.Close()
		for _, e := range entries {
			if seen++; seen > MaxWorkspaceEntries {
				return nil
			}
			if seen%1000 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			p := path.Join(dir, e.Name())
			fi, err := s.root.Lstat(p)
			if err != nil {
				continue
			}
			switch {
			case fi.IsDir():
				_ = s.root.Chmod(p, fi.Mode()&restoreMode|0o700)
				if err := walk(p); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				_ = s.root.Chmod(p, fi.Mode()&restoreMode|0o600)
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return fmt.Errorf("sandbox: restore: %w", err)
	}
	return nil
}
