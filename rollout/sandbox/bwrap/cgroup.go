package bwrap

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupMode says which cgroup layout enforces a Factory's whole-sandbox limits.
type CgroupMode string

// The cgroup modes of [Enforcement].
const (
	// CgroupNone: no cgroup; the limits are the per-process rlimits only.
	CgroupNone CgroupMode = ""
	// CgroupV1: the memory and pids controllers of a cgroup v1 (or hybrid) host,
	// /sys/fs/cgroup/memory and /sys/fs/cgroup/pids.
	CgroupV1 CgroupMode = "v1"
	// CgroupV2: the unified hierarchy with the memory and pids controllers.
	CgroupV2 CgroupMode = "v2"
)

// cgroupRoot is where the kernel's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupHost is the cgroup layout found at construction: where per-sandbox cgroups
// are created.
type cgroupHost struct {
	mode CgroupMode
	// v2 is the parent directory under the unified hierarchy (v2).
	v2 string
	// memory and pids are the parent directories under the v1 controllers.
	memory, pids string
	// memsw is true when v1 has memory.memsw.* (swap accounting), swapMax when v2
	// has memory.swap.max.
	memsw, swapMax bool
}

// procCgroupLine is one line of /proc/self/cgroup.
type procCgroupLine struct {
	id          string
	controllers []string
	path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup: "id:controllers:path" per line.
func parseProcCgroup(b []byte) []procCgroupLine {
	var out []procCgroupLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ctrls []string
		if parts[1] != "" {
			ctrls = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroupLine{id: parts[0], controllers: ctrls, path: parts[2]})
	}
	return out
}

// detectCgroup finds a usable layout under root (normally /sys/fs/cgroup) for a
// process whose /proc/self/cgroup is self. parent, when set, replaces the process's
// own cgroup as the place where sandbox cgroups are made (a path relative to each
// hierarchy's root). It prefers v2 with both controllers, then v1 with both. The
// error says what is missing.
func detectCgroup(root string, self []byte, parent string) (cgroupHost, error) {
	lines := parseProcCgroup(self)
	own := func(ctrl string) (string, bool) {
		for _, l := range lines {
			if (ctrl == "" && l.id == "0") || (ctrl != "" && containsStr(l.controllers, ctrl)) {
				if parent != "" {
					return parent, true
				}
				return l.path, true
			}
		}
		return "", false
	}
	var why []string
	// v2: the unified hierarchy mounted at root itself (pure v2) or at root/unified
	// (hybrid).
	for _, mnt := range []string{root, filepath.Join(root, "unified")} {
		ctrls, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers"))
		if err != nil {
			continue
		}
		p, ok := own("")
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, filepath.Clean("/"+p))
		have := strings.Fields(string(ctrls))
		if !containsStr(have, "memory") || !containsStr(have, "pids") {
			why = append(why, fmt.Sprintf("cgroup v2 at %s has no memory and pids controllers (it has %q)", mnt, strings.TrimSpace(string(ctrls))))
			continue
		}
		if err := enableV2Controllers(dir); err != nil {
			why = append(why, err.Error())
			continue
		}
		_, serr := os.Stat(filepath.Join(dir, "memory.swap.max"))
		return cgroupHost{mode: CgroupV2, v2: dir, swapMax: serr == nil}, nil
	}
	mp, okm := own("memory")
	pp, okp := own("pids")
	if okm && okp {
		mem := filepath.Join(root, "memory", filepath.Clean("/"+mp))
		pids := filepath.Join(root, "pids", filepath.Clean("/"+pp))
		_, errm := os.Stat(filepath.Join(mem, "memory.limit_in_bytes"))
		_, errp := os.Stat(filepath.Join(pids, "cgroup.procs"))
		if errm == nil && errp == nil {
			_, serr := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
			return cgroupHost{mode: CgroupV1, memory: mem, pids: pids, memsw: serr == nil}, nil
		}
		why = append(why, fmt.Sprintf("cgroup v1 controllers not found at %s and %s", mem, pids))
	} else if len(why) == 0 {
		why = append(why, "no cgroup v2 hierarchy with memory and pids, and no cgroup v1 memory and pids hierarchies")
	}
	return cgroupHost{}, errors.New(strings.Join(why, "; "))
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// enableV2Controllers makes sure dir passes memory and pids to its children. The
// kernel refuses that while dir itself holds processes (other than in the root), so a
// library running in a leaf cgroup must be given Config.CgroupParent.
func enableV2Controllers(dir string) error {
	cur, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	have := strings.Fields(string(cur))
	if containsStr(have, "memory") && containsStr(have, "pids") {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		return fmt.Errorf("cgroup v2: enabling memory and pids in %s: %w (a cgroup that holds processes cannot; "+
			"give Config.CgroupParent a delegated cgroup without processes)", dir, err)
	}
	return nil
}

// sandboxCgroup is the cgroup of one Sandbox (v2), or its pair of cgroups (v1), with
// the sandbox's limits. Each command runs in a child of it, so that commands can be
// killed one by one while the limits hold for all of them together.
type sandboxCgroup struct {
	host  *cgroupHost
	dirs  []string // v2: one directory; v1: memory, then pids
	uid   int      // owner of the children's cgroup.procs (v1), or -1
	gid   int
	limit int64 // memory limit, for messages
}

// newSandboxCgroup creates a cgroup with the given limits (≤ 0: none).
func (h *cgroupHost) newSandboxCgroup(name string, memory int64, pids int, uid, gid int) (*sandboxCgroup, error) {
	cg := &sandboxCgroup{host: h, uid: uid, gid: gid, limit: memory}
	var writes [][2]string
	switch h.mode {
	case CgroupV2:
		d := filepath.Join(h.v2, name)
		cg.dirs = []string{d}
		if memory > 0 {
			writes = append(writes, [2]string{filepath.Join(d, "memory.max"), strconv.FormatInt(memory, 10)})
			if h.swapMax {
				writes = append(writes, [2]string{filepath.Join(d, "memory.swap.max"), "0"})
			}
		}
		if pids > 0 {
			writes = append(writes, [2]string{filepath.Join(d, "pids.max"), strconv.Itoa(pids)})
		}
	case CgroupV1:
		m, p := filepath.Join(h.memory, name), filepath.Join(h.pids, name)
		cg.dirs = []string{m, p}
		if memory > 0 {
			writes = append(writes, [2]string{filepath.Join(m, "memory.limit_in_bytes"), strconv.FormatInt(memory, 10)})
			if h.memsw {
				writes = append(writes, [2]string{filepath.Join(m, "memory.memsw.limit_in_bytes"), strconv.FormatInt(memory, 10)})
			} else {
				writes = append(writes, [2]string{filepath.Join(m, "memory.swappiness"), "0"})
			}
		}
		if pids > 0 {
			writes = append(writes, [2]string{filepath.Join(p, "pids.max"), strconv.Itoa(pids)})
		}
	default:
		return nil, errors.New("no cgroup")
	}
	for _, d := range cg.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	if h.mode == CgroupV2 {
		// The commands' cgroups get memory.events and pids.events of their own
		// (the sandbox cgroup holds no process, so it may hand controllers down).
		_ = enableV2Controllers(cg.dirs[0])
	}
	return cg, nil
}

// remove kills what is left in the sandbox's cgroups and removes them.
func (cg *sandboxCgroup) remove() error {
	var errs []error
	for _, d := range cg.dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				child := filepath.Join(d, e.Name())
				killCgroup(child)
				errs = append(errs, rmdirCgroup(child))
			}
		}
		errs = append(errs, rmdirCgroup(d))
	}
	return errors.Join(errs...)
}

// commandCgroup is the child cgroup of one command.
type commandCgroup struct {
	cg   *sandboxCgroup
	dirs []string
	fd   int // v2: an O_PATH descriptor of the directory for clone3, else -1
	// pidsMax0 and oom0 are the sandbox cgroup's counts of refused forks and OOM
	// kills when the command started.
	pidsMax0, oom0 int
}

// newCommand makes the child cgroup of one command. On v1 with give, its
// cgroup.procs files are given to the sandbox uid, so that the command's first
// process (running as that uid) can move itself in before it starts anything
// ([commandCgroup.wrap]); without, the library moves it ([commandCgroup.join]).
func (cg *sandboxCgroup) newCommand(seq int, give bool) (*commandCgroup, error) {
	cc := &commandCgroup{cg: cg, fd: -1, pidsMax0: pidsMaxEvents(cg.dirs[len(cg.dirs)-1]), oom0: oomKillEvents(cg.host.mode, cg.dirs[0])}
	name := "run-" + strconv.Itoa(seq)
	for _, d := range cg.dirs {
		c := filepath.Join(d, name)
		if err := os.Mkdir(c, 0o755); err != nil {
			cc.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		cc.dirs = append(cc.dirs, c)
		if cg.host.mode == CgroupV1 && cg.uid >= 0 && give {
			for _, f := range []string{"cgroup.procs", "tasks"} {
				if err := os.Chown(filepath.Join(c, f), cg.uid, cg.gid); err != nil && !errors.Is(err, os.ErrNotExist) {
					cc.remove()
					return nil, fmt.Errorf("cgroup: %w", err)
				}
			}
		}
	}
	if cg.host.mode == CgroupV2 {
		fd, err := unix.Open(cc.dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			cc.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		cc.fd = fd
	}
	return cc, nil
}

// joinScript is the v1 wrapper: it writes its own pid into each cgroup.procs file
// given before "--", then executes the rest. Every process the command starts is
// therefore inside the cgroup from its first instruction.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`

// wrap returns argv, prefixed on v1 by the wrapper that joins the cgroup.
func (cc *commandCgroup) wrap(argv []string) []string {
	if cc.cg.host.mode != CgroupV1 {
		return argv
	}
	a := []string{"/bin/sh", "-c", joinScript, "sh"}
	for _, d := range cc.dirs {
		a = append(a, filepath.Join(d, "cgroup.procs"))
	}
	return append(append(a, "--"), argv...)
}

// join moves the process pid, which has started nothing yet, into the command's
// cgroups: on v1 by writing its pid to their cgroup.procs; on v2 it was made in its
// cgroup already.
func (cc *commandCgroup) join(pid int) error {
	if cc.cg.host.mode != CgroupV1 {
		return nil
	}
	for _, d := range cc.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// sysProcAttr puts the child straight into the cgroup on v2 (clone3 with
// CLONE_INTO_CGROUP).
func (cc *commandCgroup) sysProcAttr(a *syscall.SysProcAttr) {
	if cc.fd >= 0 {
		a.UseCgroupFD = true
		a.CgroupFD = cc.fd
	}
}

// oomKills is how many processes of the command the kernel's OOM killer killed. The
// kernel counts them in the victim's cgroup (v1) or in it and its ancestors (v2,
// unless memory_localevents); both the command's count and the sandbox's increase
// are read, so a command running beside another in the same sandbox may be credited
// with the other's.
func (cc *commandCgroup) oomKills() int {
	if len(cc.dirs) == 0 {
		return 0
	}
	mode := cc.cg.host.mode
	sandbox := oomKillEvents(mode, cc.cg.dirs[0]) - cc.oom0
	return max(sandbox, 0, oomKillEvents(mode, cc.dirs[0]))
}

// oomKillEvents reads the oom_kill count of the memory cgroup at dir.
func oomKillEvents(mode CgroupMode, dir string) int {
	name := "memory.events"
	if mode == CgroupV1 {
		name = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// pidsLimitHits is how many forks the pids limit refused while the command ran. The
// kernel counts them in the cgroup that hit the limit (v2) or in the one that forked
// (v1, and v2 with pids_localevents); both are read. A command running beside
// another in the same sandbox may be credited with the other's refusals.
func (cc *commandCgroup) pidsLimitHits() int {
	if len(cc.dirs) == 0 {
		return 0
	}
	sandbox := pidsMaxEvents(cc.cg.dirs[len(cc.cg.dirs)-1]) - cc.pidsMax0
	return max(sandbox, 0) + pidsMaxEvents(cc.dirs[len(cc.dirs)-1])
}

// pidsMaxEvents reads the "max" count of dir's pids.events.
func pidsMaxEvents(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "pids.events"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "max "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// kill SIGKILLs every process left in the command's cgroup.
func (cc *commandCgroup) kill() {
	for _, d := range cc.dirs {
		killCgroup(d)
	}
}

// remove kills what is left, closes the descriptor and removes the cgroup.
func (cc *commandCgroup) remove() error {
	if cc.fd >= 0 {
		_ = unix.Close(cc.fd)
		cc.fd = -1
	}
	var errs []error
	for _, d := range cc.dirs {
		killCgroup(d)
		errs = append(errs, rmdirCgroup(d))
	}
	return errors.Join(errs...)
}

// killCgroup SIGKILLs every process in the cgroup at dir until none is left (at most
// about a second). v2's cgroup.kill does it atomically; elsewhere each pid is
// opened as a pidfd and signalled only if it is still in the cgroup, so a recycled
// pid is never hit.
func killCgroup(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	procsFile := filepath.Join(dir, "cgroup.procs")
	for pause := range cgroupPauses() {
		b, err := os.ReadFile(procsFile)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if inCgroup(pid, dir) {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			_ = unix.Close(fd)
		}
		time.Sleep(pause)
	}
}

// inCgroup reports whether pid's /proc/<pid>/cgroup names the cgroup at dir.
func inCgroup(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, l := range parseProcCgroup(b) {
		if l.path != "/" && strings.HasSuffix(dir, l.path) {
			return true
		}
	}
	return false
}

// cgroupPauses are the pauses between two looks at a cgroup whose processes are
// still going: from a quarter of a millisecond, doubling up to 5 ms, a second in all.
// A process of a command that ended is usually gone within a millisecond (on cgroup
// v1 the pid namespace's init is often still exiting when the command's first
// process has ended); a fixed pause of 5 ms made every such command wait for it.
func cgroupPauses() iter.Seq[time.Duration] {
	return func(yield func(time.Duration) bool) {
		pause, left := 250*time.Microsecond, time.Second
		for left > 0 {
			if !yield(pause) {
				return
			}
			left -= pause
			pause = min(2*pause, 5*time.Millisecond)
		}
	}
}

// rmdirCgroup removes an empty cgroup, waiting (about a second at most) for killed
// processes to be gone.
func rmdirCgroup(dir string) error {
	var err error
	for pause := range cgroupPauses() {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(pause)
	}
	return fmt.Errorf("cgroup: removing %s: %w", dir, err)
}

// dirs are the parent directories of sandbox cgroups.
func (h *cgroupHost) dirs() []string {
	if h.mode == CgroupV2 {
		return []string{h.v2}
	}
	return []string{h.memory, h.pids}
}

// check creates and removes a sandbox cgroup with a command cgroup in it, to learn
// whether this process may.
func (h *cgroupHost) check(uid, gid int) error {
	var token [8]byte
	_, _ = rand.Read(token[:])
	cg, err := h.newSandboxCgroup("agenticopd-check-"+hex.EncodeToString(token[:]), 0, 0, uid, gid)
	if err != nil {
		return err
	}
	cc, err := cg.newCommand(0, true)
	if err == nil {
		err = cc.remove()
	}
	return errors.Join(err, cg.remove())
}

// removeStale removes the cgroups named name under h's parents, killing what is in
// them (a sandbox whose library process died).
func (h *cgroupHost) removeStale(name string) {
	var dirs []string
	for _, d := range h.dirs() {
		dirs = append(dirs, filepath.Join(d, name))
	}
	_ = (&sandboxCgroup{host: h, dirs: dirs}).remove()
}
