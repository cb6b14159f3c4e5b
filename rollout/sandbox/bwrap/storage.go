package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StorageMode says how a Factory bounds a workspace's disk use.
type StorageMode string

// The storage modes of [Enforcement].
const (
	// StorageNone: Config.DiskQuota is negative, nothing bounds the workspace.
	StorageNone StorageMode = ""
	// StorageTmpfs: each workspace is a tmpfs of Config.DiskQuota bytes and
	// MaxWorkspaceEntries inodes, mounted by the library (root only). The kernel
	// refuses writes past it (ENOSPC), deleted-but-open files included.
	StorageTmpfs StorageMode = "tmpfs"
	// StorageWalk: the workspace is a directory under Config.BaseDir, measured while
	// commands run: a walk through its os.Root plus the deleted-but-open files the
	// command's processes hold (found through /proc/<pid>/fd).
	StorageWalk StorageMode = "walk"
)

// maxWalkShare bounds the host CPU the walk of [StorageWalk] may use: the next
// check waits at least this many times as long as the last one took: 2.5% of a
// core by that measure, which leaves room for the garbage collection the walk causes
// afterwards (5% in all).
const maxWalkShare = 40

// mountWorkspace mounts a tmpfs of the quota's size on ws, owned by uid/gid.
func mountWorkspace(ws string, quota int64, uid, gid int) error {
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", quota, MaxWorkspaceEntries+1, uid, gid) // +1: the root
	if err := unix.Mount("tmpfs", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs workspace: %w", err)
	}
	return nil
}

// unmountWorkspace detaches the workspace's tmpfs; its memory is freed once the
// last process holding a file of it is gone.
func unmountWorkspace(ws string) error {
	if err := unix.Unmount(ws, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting the workspace: %w", err)
	}
	return nil
}

// The directories of an overlaid workspace, in the sandbox's directory: the
// workspace's files (the overlay's upper layer), an empty lower layer, and the
// overlay's work directory.
const (
	overlayData  = "data"
	overlayEmpty = "empty"
	overlayWork  = "overlay-work"
)

// mountOverlay mounts on ws an overlay whose upper layer is data (the workspace's
// files, on the disk of Config.BaseDir) over an empty lower layer. The workspace is
// then the root of a file system of its own, so a bind of it shows "/" as its root in
// /proc/self/mountinfo, where a bind of a plain directory shows the directory's path
// within its file system; and the layers are named in the mount's options as
// /proc/self/fd/N of descriptors this process held during the call, so that the
// options name no host path either. data must be owned by the sandbox uid (the
// overlay's root takes its owner and mode); empty and work are the library's.
func mountOverlay(ws, empty, data, work string) error {
	var fds [3]int
	for i, dir := range []string{empty, data, work} {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("mounting the workspace's overlay: %w", err)
		}
		defer unix.Close(fd)
		fds[i] = fd
	}
	opts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d", fds[0], fds[1], fds[2])
	if err := unix.Mount("overlay", ws, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the workspace's overlay: %w", err)
	}
	return nil
}

// makeOverlay makes the layers of an overlaid workspace in dir, data owned by
// uid/gid, and mounts the overlay on ws.
func makeOverlay(dir, ws string, uid, gid int, chown bool) error {
	data, empty, work := filepath.Join(dir, overlayData), filepath.Join(dir, overlayEmpty), filepath.Join(dir, overlayWork)
	for _, d := range []string{data, empty, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if chown {
		if err := os.Chown(data, uid, gid); err != nil {
			return err
		}
	}
	return mountOverlay(ws, empty, data, work)
}

// checkOverlay tries an overlaid workspace in base, to learn whether walked
// workspaces can hide their host path.
func checkOverlay(base string) error {
	dir, err := os.MkdirTemp(base, "agenticopd-mountcheck-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	if err := makeOverlay(dir, ws, 0, 0, false); err != nil {
		return err
	}
	return unix.Unmount(ws, unix.MNT_DETACH)
}

// checkMount tries a tmpfs mount in base, to learn whether workspaces can be tmpfs.
func checkMount(base string) error {
	dir, err := os.MkdirTemp(base, "agenticopd-mountcheck-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4096,nr_inodes=4"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	return unix.Unmount(dir, unix.MNT_DETACH)
}

var errOverQuota = errors.New("over quota")

// quotaState is what the last disk check of a sandbox found, so that walks of a large
// workspace stay within their CPU budget across commands.
type quotaState struct {
	mu      sync.Mutex
	at      time.Time
	cost    time.Duration
	over    bool
	walking bool
	ended   chan struct{} // closed when the running walk ends
}

// checkQuota checks the workspace unless a walked workspace was found within its quota
// too recently for the CPU budget (maxWalkShare), in which case it reports that. It
// returns the verdict and how long to wait before the next check. The check at a
// command's exit (atExit) that finds a walk running waits for it and takes its
// verdict: that walk began while the command ran, so it saw what the command left.
func (s *Sandbox) checkQuota(pids func() []int, atExit bool) (bool, time.Duration) {
	q := &s.quota
	q.mu.Lock()
	if atExit && q.walking {
		ended := q.ended
		q.mu.Unlock()
		<-ended
		q.mu.Lock()
		over := q.over
		q.mu.Unlock()
		return over, DiskCheckInterval
	}
	if !s.mounted {
		wait := maxWalkShare*q.cost - time.Since(q.at)
		// Only a verdict of within quota is reused: one of over quota is walked
		// again (also beside a walk still running, which may have begun before the
		// agent freed the space), so that it never outlives the files it counted.
		if !q.over && (q.walking || wait > 0) {
			over := q.over
			q.mu.Unlock()
			return over, max(DiskCheckInterval, wait)
		}
	}
	q.walking = true
	ended := make(chan struct{})
	q.ended = ended
	q.mu.Unlock()

	over, cost := s.overQuota(pids())

	q.mu.Lock()
	q.at, q.cost, q.over = time.Now(), cost, over
	if q.ended == ended {
		q.walking = false
	}
	q.mu.Unlock()
	close(ended)
	return over, max(DiskCheckInterval, maxWalkShare*cost)
}

// overQuota reports whether the workspace is over Config.DiskQuota. For a tmpfs
// workspace that is a statfs: full (no block or no inode left). Otherwise the
// workspace is walked by descriptors from its os.Root ([Sandbox.walkedSize]: a
// symlink swapped in mid-walk leads nowhere, and the work is linear in the entries
// whatever their depth), and the deleted-but-open files held by pids are added. The second
// result is what the check cost the host.
func (s *Sandbox) overQuota(pids []int) (bool, time.Duration) {
	quota := s.f.cfg.DiskQuota
	if quota < 0 {
		return false, 0
	}
	start := time.Now()
	cpu0 := processCPU()
	if s.mounted {
		var st unix.Statfs_t
		if err := unix.Statfs(s.ws, &st); err != nil {
			return false, time.Since(start)
		}
		return st.Bavail == 0 || st.Ffree == 0, time.Since(start)
	}
	total, over := s.walkedSize(quota)
	if !over {
		total += deletedOpenBytes(pids, s.wsDev)
	}
	// The walk's cost is its wall time or, if more, the CPU the whole process spent
	// meanwhile (the garbage collector's share of the walk runs on other threads).
	return over || total > quota, max(time.Since(start), processCPU()-cpu0)
}

// walkedSize adds up the sizes of the workspace's regular files by a walk of its
// tree ([walkTree]: by descriptors from its os.Root, symlinks never followed); it
// stops as soon as the total passes quota or the entries pass
// [MaxWorkspaceEntries], and then reports over. A directory it cannot read (or a
// workspace root) counts as empty.
func (s *Sandbox) walkedSize(quota int64) (total int64, over bool) {
	root, err := s.root.Open(".")
	if err != nil {
		return 0, false
	}
	defer root.Close()
	_, err = walkTree(root, MaxWorkspaceEntries, nil, func(dir int, name string, typ uint8) (bool, error) {
		switch typ {
		case unix.DT_DIR:
			return true, nil
		case unix.DT_REG, unix.DT_UNKNOWN:
		default:
			return false, nil
		}
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return false, nil // vanished: skip it
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return true, nil
		case unix.S_IFREG:
			if total += st.Size; total > quota {
				return false, errOverQuota
			}
		}
		return false, nil
	})
	return total, err != nil // errOverQuota or errWalkEntries
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// deletedOpenBytes sums the sizes of the files on device dev that the processes pids
// hold open (or as their working directory's files) although they are deleted: the
// walk cannot see them, the disk still holds them.
func deletedOpenBytes(pids []int, dev uint64) int64 {
	seen := map[uint64]bool{}
	var total int64
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			var st unix.Stat_t
			if unix.Stat(dir+"/"+e.Name(), &st) != nil { // follows the descriptor's link
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 || st.Dev != dev || seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
			total += max(st.Size, st.Blocks*512)
		}
	}
	return total
}

// commandPIDs lists the host pids of a running command: its cgroup's processes when it
// has one; otherwise the leader's descendants and every process sharing a pid
// namespace with one of them (bubblewrap's sandbox, including setsid children),
// found by a scan of /proc.
func commandPIDs(leader int, cc *commandCgroup) []int {
	if cc != nil && len(cc.dirs) > 0 {
		b, err := os.ReadFile(filepath.Join(cc.dirs[0], "cgroup.procs"))
		if err == nil {
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return pids
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{leader}
	}
	type info struct {
		ppid int
		ns   string
	}
	procs := map[int]info{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid")
		procs[pid] = info{ppid: parentPID(pid), ns: ns}
	}
	selfNS, _ := os.Readlink("/proc/self/ns/pid")
	in := map[int]bool{leader: true}
	for changed := true; changed; {
		changed = false
		for pid, i := range procs {
			if !in[pid] && in[i.ppid] {
				in[pid], changed = true, true
			}
		}
	}
	nss := map[string]bool{}
	for pid := range in {
		if ns := procs[pid].ns; ns != "" && ns != selfNS {
			nss[ns] = true
		}
	}
	var pids []int
	for pid, i := range procs {
		if in[pid] || nss[i.ns] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// deviceOf is the st_dev of path.
func deviceOf(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Dev
	}
	return 0
}
