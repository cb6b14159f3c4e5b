package main

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// restoreCheck is how often (in entries) the walk checks its time budget.
const restoreCheck = 1024

// errEntries stops a walk past its entry bound (not an error of the restore).
var errEntries = errors.New("too many entries")

// restore gives the workspace's owner back what the agent's code took from it, as
// chmod -R u+rwX would and as the bubblewrap sandbox's Restore does: every directory
// gets the owner's read, write and search bits, every regular file the owner's read
// and write bits; symlinks, FIFOs, sockets and devices are left alone and never
// followed.
//
// The walk holds two directory descriptors at most, whatever the depth: it goes
// down by openat(parent, name, O_NOFOLLOW) and back up by openat(dir, ".."),
// checking that ".." is the directory it came from (device and inode), so its work
// is linear in the entries at any depth. Past req.Budget it stops with
// [podproto.KindBudget].
func restore(req podproto.RestoreRequest) podproto.Result {
	const op = podproto.OpRestore
	deadline := time.Now().Add(req.Budget)
	fd, err := unix.Open(req.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		_ = unix.Chmod(req.Root, 0o700) // the agent took the workspace's own bits
		var st unix.Stat_t
		if unix.Stat(req.Root, &st) == nil {
			_ = unix.Chmod(req.Root, st.Mode&0o7777|0o700)
		}
		fd, err = unix.Open(req.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return fail(op, "", &os.PathError{Op: "open", Path: req.Root, Err: err})
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmod(fd, st.Mode&0o7777|0o700)
	}
	w := &restoreWalk{max: req.MaxEntries, deadline: deadline}
	err = w.run(fd)
	switch {
	case err == nil, errors.Is(err, errEntries):
		return podproto.Result{}
	case errors.Is(err, errBudget):
		return fail(op, "", &podproto.Error{Kind: podproto.KindBudget,
			Message: "the walk of the workspace did not end within " + req.Budget.String()})
	}
	return fail(op, "", err)
}

var errBudget = errors.New("time budget exceeded")

type restoreWalk struct {
	max      int
	deadline time.Time
	entries  int
}

// frame is a directory on the walk's path: its identity and the subdirectories
// still to visit.
type frame struct {
	dev, ino uint64
	subdirs  []string
}

// run walks the tree below the directory fd (which it closes).
func (w *restoreWalk) run(fd int) error {
	cur := fd
	defer func() { unix.Close(cur) }()
	top, err := w.list(cur)
	if err != nil {
		return err
	}
	stack := []frame{top}
	for len(stack) > 0 {
		d := len(stack) - 1
		if len(stack[d].subdirs) == 0 {
			stack = stack[:d]
			if d == 0 {
				return nil
			}
			up, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			var st unix.Stat_t
			if err := unix.Fstat(up, &st); err != nil || st.Dev != stack[d-1].dev || st.Ino != stack[d-1].ino {
				unix.Close(up)
				return errors.New("the workspace changed during the restore")
			}
			unix.Close(cur)
			cur = up
			continue
		}
		name := stack[d].subdirs[len(stack[d].subdirs)-1]
		stack[d].subdirs = stack[d].subdirs[:len(stack[d].subdirs)-1]
		down, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // cannot be entered: left as it is
		}
		f, err := w.list(down)
		if err != nil {
			unix.Close(down)
			return err
		}
		unix.Close(cur)
		cur = down
		stack = append(stack, f)
	}
	return nil
}

// list restores the entries of the directory fd and returns its frame.
func (w *restoreWalk) list(fd int) (frame, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return frame{}, err
	}
	fr := frame{dev: st.Dev, ino: st.Ino}
	dup, err := unix.Dup(fd)
	if err != nil {
		return frame{}, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			w.entries++
			if w.entries > w.max {
				return frame{}, errEntries
			}
			if w.entries%restoreCheck == 0 && time.Now().After(w.deadline) {
				return frame{}, errBudget
			}
			if restoreEntry(fd, e.Name(), e.Type()) {
				fr.subdirs = append(fr.subdirs, e.Name())
			}
		}
		if len(entries) == 0 || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			break // what could be listed was restored
		}
	}
	if time.Now().After(w.deadline) {
		return frame{}, errBudget
	}
	return fr, nil
}

// restoreEntry gives the owner of a directory its read, write and search bits, of a
// regular file its read and write bits, and reports a directory to walk into.
func restoreEntry(dir int, name string, typ os.FileMode) bool {
	if typ&^os.ModeDir != 0 {
		return false // a symlink, FIFO, socket or device
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	var want uint32
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		want = 0o700
	case unix.S_IFREG:
		want = 0o600
	default:
		return false
	}
	if mode := st.Mode & 0o7777; mode&want != want {
		// Fchmodat follows a symlink; the entry was just seen not to be one, and
		// nothing of the agent's runs during a restore.
		_ = unix.Fchmodat(dir, name, mode|want, 0)
	}
	return want == 0o700
}
