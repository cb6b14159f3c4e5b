package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The flock(2) modes the cache uses. A process that dies loses its locks with it,
// so a SIGKILL never leaves an image locked.
const (
	lockShared    = unix.LOCK_SH
	lockExclusive = unix.LOCK_EX
)

// flockPoll is how often a blocked lock is tried again; flock(2) itself cannot be
// interrupted by a context.
const flockPoll = 20 * time.Millisecond

// flock takes (or converts to) how on f, waiting until it can or ctx ends.
func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("images: flock %s: %w", f.Name(), err)
		}
		t := time.NewTimer(flockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("images: waiting for %s: %w", f.Name(), ctx.Err())
		case <-t.C:
		}
	}
}

// tryLock takes an exclusive lock on f if no one holds any.
func tryLock(f *os.File) bool {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

func unlock(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }
