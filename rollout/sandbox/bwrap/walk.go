package bwrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The walk of the workspace's tree on the host ([Sandbox.Restore], the quota check
// of [StorageWalk]) goes by directory descriptors: each directory is opened once,
// by name, relative to its parent's descriptor (openat with O_NOFOLLOW), and every
// entry is looked at relative to its directory's descriptor, so the cost of a level
// does not grow with its depth and no symlink is followed. The walk is depth-first
// with an explicit stack (no recursion) and holds at most walkOpenDirs+3
// descriptors, however deep the tree; see the package doc ("Walking the
// workspace") for how it returns to a directory whose descriptor it closed.
const (
	// walkOpenDirs is how many directories with subdirectories still to visit
	// keep their descriptor open; past it the shallowest is closed and later
	// reopened by ".." from below.
	walkOpenDirs = 64
	// walkCheckSteps is how often (in entries and directories) the walk calls its
	// check function.
	walkCheckSteps = 1024
	// walkDotDots is how many ".." components one openat resolves (3 bytes each,
	// within PATH_MAX).
	walkDotDots = 1024
	// walkBufSize is the getdents buffer.
	walkBufSize = 32 << 10
)

// errWalkEntries is walkTree's error for a tree of more entries than its limit.
var errWalkEntries = errors.New("too many entries")

// visitFunc is called by walkTree for each entry of a directory, with the
// directory's descriptor, the entry's name and its type as the listing gives it
// (unix.DT_DIR, unix.DT_REG, ...; unix.DT_UNKNOWN where the file system does not
// say). It reports whether the entry is a directory to walk into; an error stops the
// walk, and walkTree returns it.
type visitFunc func(dir int, name string, typ uint8) (descend bool, err error)

// walkFrame is a directory on the walk's stack: one with subdirectories still to
// visit.
type walkFrame struct {
	fd       int // -1 when closed
	dev, ino uint64
	subdirs  []string
}

// treeWalk is one walk: its stack, its descriptors and its counts.
type treeWalk struct {
	visit visitFunc
	check func() error
	limit int
	buf   []byte
	stack []walkFrame
	open  int // frames other than the root with an open fd
	low   int // frames in [1, low) have their fd closed
	// cursor is an open directory the walk was in last, curDepth deep; a frame
	// whose fd was closed is reopened from it by "..".
	cursor, curDepth int
	// lost is set when a directory could not be reopened as itself (the tree
	// changed under the walk); closed frames are then given up.
	lost bool
	walkStats
}

// walkStats counts what a walk did; tests hold it to the tree's size.
type walkStats struct {
	entries int // entries seen in listings
	opens   int // directories opened by name
	reopens int // directories reopened by ".."
	dotdots int // ".." components resolved by reopens
	maxOpen int // the most descriptors held at once, the root's included
	steps   int
}

// walkTree walks the tree below the directory root (which it neither closes nor
// changes) depth-first and calls visit for every entry. It stops with
// errWalkEntries past limit entries, with check's error (called every
// walkCheckSteps entries and directories, when not nil) or with visit's. A
// directory it cannot open or read is skipped.
func walkTree(root *os.File, limit int, check func() error, visit visitFunc) (walkStats, error) {
	w := &treeWalk{visit: visit, check: check, limit: limit, buf: make([]byte, walkBufSize), cursor: -1, low: 1}
	defer w.closeAll()
	err := w.run(int(root.Fd()))
	return w.walkStats, err
}

func (w *treeWalk) run(rootFD int) error {
	subdirs, err := w.sortedSubdirs(rootFD)
	if err != nil || len(subdirs) == 0 {
		return err
	}
	w.stack = append(w.stack, walkFrame{fd: rootFD, subdirs: subdirs})
	w.maxOpen = 1
	for len(w.stack) > 0 {
		if err := w.step(); err != nil {
			return err
		}
		d := len(w.stack) - 1
		top := &w.stack[d]
		if len(top.subdirs) == 0 {
			w.stack = w.stack[:d]
			w.low = min(w.low, max(len(w.stack), 1))
			continue
		}
		if top.fd < 0 && !w.reopen(d) {
			top.subdirs = nil
			continue
		}
		name := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		fd, err := unix.Openat(top.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if len(top.subdirs) == 0 && d > 0 {
				w.retire(top.fd, d) // the last way back up from here
				top.fd = -1
				w.open--
			}
			continue
		}
		w.opens++
		w.maxOpen = max(w.maxOpen, w.held()+1)
		if len(top.subdirs) == 0 && d > 0 {
			// Nothing left to open from top: its fd goes (the child's leads back).
			unix.Close(top.fd)
			top.fd = -1
			w.open--
		}
		subdirs, err := w.sortedSubdirs(fd)
		if err != nil {
			unix.Close(fd)
			return err
		}
		if len(subdirs) == 0 {
			w.retire(fd, d+1)
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			w.retire(fd, d+1)
			continue
		}
		w.closeCursor() // it lies in a subtree the walk is done with
		w.stack = append(w.stack, walkFrame{fd: fd, dev: st.Dev, ino: st.Ino, subdirs: subdirs})
		if w.open++; w.open > walkOpenDirs {
			w.evict()
		}
	}
	return nil
}

// step counts one entry or directory and calls check every walkCheckSteps.
func (w *treeWalk) step() error {
	if w.steps++; w.steps%walkCheckSteps == 0 && w.check != nil {
		return w.check()
	}
	return nil
}

// held is how many descriptors the walk holds: the root's, the frames' and the
// cursor.
func (w *treeWalk) held() int {
	n := 1 + w.open
	if w.cursor >= 0 {
		n++
	}
	return n
}

// list reads the directory fd, calls visit for each entry and returns the names of
// those to walk into.
func (w *treeWalk) list(fd int) ([]string, error) {
	var subdirs []string
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err != nil || n <= 0 {
			return subdirs, nil // an unreadable directory ends here
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(w.buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return subdirs, nil
			}
			typ := w.buf[off+18]
			name := w.buf[off+19 : off+reclen]
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if w.entries++; w.entries > w.limit {
				return nil, errWalkEntries
			}
			if err := w.step(); err != nil {
				return nil, err
			}
			s := string(name)
			descend, err := w.visit(fd, s, typ)
			if err != nil {
				return nil, err
			}
			if descend {
				subdirs = append(subdirs, s)
			}
		}
	}
}

// sortedSubdirs returns list's subdirectories sorted, so the walk's order does not
// depend on the file system's (it takes them last name first).
func (w *treeWalk) sortedSubdirs(fd int) ([]string, error) {
	subdirs, err := w.list(fd)
	slices.Sort(subdirs)
	return subdirs, err
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// retire makes fd, depth deep, the cursor, closing the last one.
func (w *treeWalk) retire(fd, depth int) {
	w.closeCursor()
	w.cursor, w.curDepth = fd, depth
}

func (w *treeWalk) closeCursor() {
	if w.cursor >= 0 {
		unix.Close(w.cursor)
		w.cursor = -1
	}
}

// evict closes the fd of the shallowest frame (the root's aside) that holds one.
func (w *treeWalk) evict() {
	for i := w.low; i < len(w.stack); i++ {
		if f := &w.stack[i]; f.fd >= 0 {
			unix.Close(f.fd)
			f.fd = -1
			w.open--
			w.low = i + 1
			return
		}
	}
}

// reopen gives the frame d deep its fd back: ".." from the cursor, as many times as
// the cursor is deeper, and the directory reached must be the frame's own (same
// device and inode), else the frame is given up. The ".." it resolves are the
// levels the walk has just come back up, so each level is resolved at most once
// per visit.
func (w *treeWalk) reopen(d int) bool {
	f := &w.stack[d]
	up := w.curDepth - d
	if w.lost || w.cursor < 0 || up <= 0 {
		w.lost = true
		return false
	}
	fd := w.cursor
	w.cursor = -1
	for up > 0 {
		k := min(up, walkDotDots)
		next, err := unix.Openat(fd, strings.Repeat("../", k-1)+"..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			w.lost = true
			return false
		}
		w.dotdots += k
		up -= k
		fd = next
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Dev != f.dev || st.Ino != f.ino {
		unix.Close(fd)
		w.lost = true
		return false
	}
	// Every frame below it was closed before it was (the shallowest goes first)
	// and none has been reopened since, so it is the only one open.
	w.reopens++
	f.fd = fd
	w.open++
	w.low = min(w.low, d)
	return true
}

// closeAll closes every descriptor the walk still holds but the root's.
func (w *treeWalk) closeAll() {
	w.closeCursor()
	for i := 1; i < len(w.stack); i++ {
		if w.stack[i].fd >= 0 {
			unix.Close(w.stack[i].fd)
		}
	}
}

// chmodNoFollow changes the mode of the entry name of the directory dir without
// following it if it is a symlink: fchmodat2 with AT_SYMLINK_NOFOLLOW, or where the
// kernel lacks it (before Linux 6.6) a chmod of an O_PATH descriptor of the entry
// through /proc/self/fd, as the C libraries do.
func chmodNoFollow(dir int, name string, mode uint32) error {
	err := unix.Fchmodat(dir, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
}

// removeTree removes dir and everything below it by descriptors, as the walk goes:
// each directory is opened once by name from its parent (given its owner's bits
// first, for a directory of mode 000 when not root), its entries other than
// directories are unlinked, and when it is empty the removal climbs back by ".."
// (which must be the parent it left: same device and inode) and removes it. It holds
// two descriptors at most and its work is linear in the entries at any depth, where
// os.RemoveAll holds a descriptor per level (a chain deeper than the process's limit
// fails with EMFILE, and meanwhile every other open of the process fails too).
// Nothing else may change the tree meanwhile; if it does, removeTree stops with an
// error. A directory it cannot empty is left and the first error returned.
func removeTree(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return os.Remove(dir)
		}
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	type frame struct {
		name     string
		dev, ino uint64
		subdirs  []string
	}
	var first error
	note := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	buf := make([]byte, walkBufSize)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	subdirs, err := emptyDir(fd, buf)
	note(err)
	stack := []frame{{dev: st.Dev, ino: st.Ino, subdirs: subdirs}}
	for {
		top := &stack[len(stack)-1]
		if n := len(top.subdirs); n > 0 {
			name := top.subdirs[n-1]
			top.subdirs = top.subdirs[:n-1]
			_ = chmodNoFollow(fd, name, 0o700)
			child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil {
				err = unix.Fstat(child, &st)
				if err != nil {
					unix.Close(child)
				}
			}
			if err != nil {
				note(err)
				continue
			}
			unix.Close(fd)
			fd = child
			subdirs, err := emptyDir(fd, buf)
			note(err)
			stack = append(stack, frame{name: name, dev: st.Dev, ino: st.Ino, subdirs: subdirs})
			continue
		}
		if len(stack) == 1 {
			break
		}
		parent, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = parent
		up := &stack[len(stack)-2]
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != up.dev || st.Ino != up.ino {
			unix.Close(fd)
			return fmt.Errorf("removing %s: the tree changed during the removal", dir)
		}
		note(unix.Unlinkat(fd, top.name, unix.AT_REMOVEDIR))
		stack = stack[:len(stack)-1]
	}
	unix.Close(fd)
	if err := os.Remove(dir); err != nil {
		note(err)
	}
	if first != nil {
		return fmt.Errorf("removing %s: %w", dir, first)
	}
	return nil
}

// emptyDir reads the whole directory fd, unlinks every entry that is not a
// directory and returns the names of the directories.
func emptyDir(fd int, buf []byte) ([]string, error) {
	var names []string
	var types []uint8
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if string(name) != "." && string(name) != ".." {
				names, types = append(names, string(name)), append(types, typ)
			}
		}
	}
	var subdirs []string
	var first error
	for i, name := range names {
		if types[i] == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				types[i] = unix.DT_DIR
			}
		}
		if types[i] == unix.DT_DIR {
			subdirs = append(subdirs, name)
			continue
		}
		if err := unix.Unlinkat(fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) && first == nil {
			first = err
		}
	}
	return subdirs, first
}
