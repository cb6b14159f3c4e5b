package bwrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
)

// waitDelay bounds how long Wait waits for output pipes after the process exited
// (held open only by a process that escaped the kill; see §4.5 of the design).
const waitDelay = 500 * time.Millisecond

// Result is a [rollout.CommandResult] plus the byte counts of the full output.
type Result struct {
	rollout.CommandResult
	// StdoutBytes and StderrBytes count everything the command wrote, including
	// what was cut at the per-stream cap.
	StdoutBytes, StderrBytes int64
	// DiskQuotaExceeded reports that the workspace was found over Config.DiskQuota
	// while the command ran (it was then killed) or when it ended. A note saying so
	// ends Stderr.
	DiskQuotaExceeded bool
	// MemoryLimitHit reports that the kernel killed a process of the command (OOM)
	// because the sandbox reached Limits.Memory. A note saying so ends Stderr. When
	// the process killed was bubblewrap itself, before the command ran (the sandbox's
	// memory was already full), the result says so too, with no [ErrStart].
	MemoryLimitHit bool
	// ProcessLimitHit reports that the sandbox's pids limit (Limits.Processes)
	// refused a fork of the command. A note saying so ends Stderr. Without a cgroup
	// it is never set (RLIMIT_NPROC failures are the command's to report).
	ProcessLimitHit bool
}

// Run runs cmd in the sandbox. See [Sandbox.RunDetailed].
func (s *Sandbox) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	res, err := s.RunDetailed(ctx, cmd)
	return res.CommandResult, err
}

// RunDetailed runs cmd in the sandbox and reports what it did.
//
// A command that fails, times out or is killed for its output or disk use is
// reported in the result: ExitCode 124 and TimedOut on timeout, OutputKilled (with
// the 128+9 of SIGKILL) past the hard output cap, DiskQuotaExceeded over the disk
// quota, MemoryLimitHit when the OOM killer took a process (bubblewrap included). The
// error is for the sandbox itself: a bad
// command ([ErrInvalidCommand]), a closed sandbox ([ErrClosed]), bubblewrap failing
// to set up ([ErrStart], with bubblewrap's message in Stderr), or ctx ending (the
// command is killed and the partial result returned with ctx's error). In every
// case no process of the command is left running when it returns.
func (s *Sandbox) RunDetailed(ctx context.Context, c rollout.Command) (Result, error) {
	spec, timeout, err := s.prepare(ctx, c)
	if err != nil {
		return Result{}, err
	}
	defer s.active.Done()
	if c.Stdin != nil {
		spec.cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	return s.execute(ctx, spec, timeout)
}

// prepare checks c and builds its command. On success the command is registered
// (s.enter) and the caller must call s.active.Done once it has run.
func (s *Sandbox) prepare(ctx context.Context, c rollout.Command) (runSpec, time.Duration, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return runSpec{}, 0, ErrClosed
	}
	argv, err := commandArgv(c)
	if err != nil {
		return runSpec{}, 0, err
	}
	rel, err := s.workDir(c.Dir)
	if err != nil {
		return runSpec{}, 0, err
	}
	if c.Timeout < 0 {
		return runSpec{}, 0, commandError("negative timeout %v", c.Timeout)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = s.f.cfg.Timeout
	}
	timeout = min(timeout, s.f.cfg.MaxTimeout)
	if err := ctx.Err(); err != nil {
		return runSpec{}, 0, fmt.Errorf("sandbox: run: %w", err)
	}
	if !s.enter() {
		return runSpec{}, 0, ErrClosed
	}
	var spec runSpec
	if s.f.cfg.Unconfined {
		spec, err = s.unconfinedCommand(rel, timeout, argv)
	} else {
		spec, err = s.bwrapCommand(rel, timeout, argv)
	}
	if err != nil {
		s.active.Done()
		return runSpec{}, 0, fmt.Errorf("sandbox: run: %w", err)
	}
	if err := s.joinCgroup(&spec); err != nil {
		s.active.Done()
		return runSpec{}, 0, fmt.Errorf("sandbox: run: %w", err)
	}
	return spec, timeout, nil
}

// discard releases a prepared command that will not be executed: its descriptors
// for bubblewrap and its cgroup.
func (spec *runSpec) discard() {
	for _, f := range spec.cmd.ExtraFiles {
		_ = f.Close()
	}
	if spec.status != nil {
		_ = spec.status.Close()
	}
	spec.gate.close()
	if spec.cg != nil {
		_ = spec.cg.remove()
	}
}

// joinCgroup gives the command a cgroup of its own inside the sandbox's, which its
// first process enters before it starts anything: through clone3 on v2; on v1, by
// the library before it opens the command's gate, or without a gate through a
// wrapper shell that writes its own pid.
func (s *Sandbox) joinCgroup(spec *runSpec) error {
	if s.cg == nil {
		return nil
	}
	cc, err := s.cg.newCommand(int(s.runs.Add(1)), spec.gate == nil)
	if err != nil {
		spec.discard()
		return err
	}
	spec.cg = cc
	if spec.gate != nil {
		return nil
	}
	if a := cc.wrap(spec.cmd.Args); len(a) != len(spec.cmd.Args) {
		spec.cmd.Path, spec.cmd.Args = a[0], a
	}
	return nil
}

// commandArgv is the argv a Command asks for.
func commandArgv(c rollout.Command) ([]string, error) {
	if len(c.Argv) > 0 {
		if c.Argv[0] == "" {
			return nil, commandError("empty program name in Argv")
		}
		return c.Argv, nil
	}
	if strings.TrimSpace(c.Shell) == "" {
		return nil, commandError("neither Argv nor Shell is set")
	}
	return []string{"/bin/sh", "-c", c.Shell}, nil
}

// workDir checks Command.Dir and returns it as a clean slash path relative to the
// workspace ("." for the root).
func (s *Sandbox) workDir(dir string) (string, error) {
	if dir == "" || dir == "." {
		return ".", nil
	}
	if !filepath.IsLocal(dir) {
		return "", commandError("working directory %q is not inside the workspace", dir)
	}
	fi, err := s.root.Stat(dir)
	if err != nil {
		return "", commandError("working directory: %v", err)
	}
	if !fi.IsDir() {
		return "", commandError("working directory %q is not a directory", dir)
	}
	return filepath.ToSlash(filepath.Clean(dir)), nil
}

// runSpec is a prepared command.
type runSpec struct {
	cmd *exec.Cmd
	// status is the read end of bwrap's --json-status-fd (nil when unconfined).
	status *os.File
	// direct is true when cmd is bwrap itself in this pid namespace, so that the pid
	// of the sandbox init it reports is one of it; in a pid namespace of its own
	// (gate.go), under unshare or under nsenter it is not, and nothing of the command
	// is left once cmd is reaped.
	direct bool
	// gate holds bwrap at its options until the library has put it in its cgroup
	// (nil: bwrap reads them from a memfd, see gate.go).
	gate *gate
	// marker is the environment entry that tags every process of an unconfined
	// command, so the ones that left the process group can be found.
	marker string
	// cg is the command's cgroup (nil without one); execute removes it.
	cg *commandCgroup
	// stream is set for a command started by Start (see stream.go).
	stream *stream
}

func (s *Sandbox) baseEnv(home, bin string) []string {
	return []string{
		"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
		"TMPDIR=/tmp",
		"OPENBLAS_NUM_THREADS=1",
		"OMP_NUM_THREADS=1",
	}
}

func (s *Sandbox) bwrapCommand(rel string, timeout time.Duration, argv []string) (runSpec, error) {
	f := s.f
	// The options, which name host paths, reach bwrap through a file descriptor
	// (--args), so they appear in no command line, inside the sandbox or out.
	var opts []string
	if s.img != nil {
		opts = imageBwrapArgs(f, s, path.Join(s.img.workDir, rel))
	} else {
		opts = bwrapArgs(f, s.bind, path.Join(WorkspaceDir, rel), s.baseEnv(WorkspaceDir, sandboxBin))
		if s.network {
			opts = append(opts, "--share-net")
		}
	}
	opts = append(opts, "--json-status-fd", "3")
	r, w, err := os.Pipe()
	if err != nil {
		return runSpec{}, err
	}
	if s.holder == nil && f.ownNS {
		return s.gatedCommand(opts, timeout, argv, r, w)
	}
	optFile, err := argsFile(opts)
	if err != nil {
		closeAll(r, w)
		return runSpec{}, err
	}
	limits := f.prlimitArgs(timeout)
	args := append(append([]string{"--args", "4", "--"}, limits...), argv...)
	cmd := exec.Command(f.cfg.BwrapPath, args...)
	if s.img != nil {
		// An image need not have prlimit: the host's sets the limits on bubblewrap,
		// which the command inherits (prlimit execs bwrap, the same process).
		args = append(append(limits, f.cfg.BwrapPath, "--args", "4", "--"), argv...)
		cmd = exec.Command(args[0], args[1:]...)
	}
	if s.holder != nil {
		s.holder.enter(cmd) // the workspace's namespaces, where it is an overlay (overlay.go)
	} else {
		f.reaped(cmd)
	}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{w, optFile}
	return runSpec{cmd: cmd, status: r, direct: s.holder == nil && f.unshare == ""}, nil
}

// reaped makes cmd, a bwrap command started without root, start as the init of a pid
// namespace of its own (unshare(1) forks it there and waits for it), in a user
// namespace that maps the command's uid to itself, for the reason gate.go gives for
// the pid namespace the library makes as root. The library does not make these
// namespaces itself without root: a pid namespace then needs a user namespace, and Go
// starts a process in a new user namespace by copying the whole calling process
// rather than sharing its memory until exec, which costs milliseconds per command in
// a process holding a large heap. Without f.unshare (see probeReaping) cmd is left as
// it is.
func (f *Factory) reaped(cmd *exec.Cmd) {
	if f.unshare == "" {
		return
	}
	args := append([]string{f.unshare, "--map-current-user", "--pid", "--kill-child", "--", cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = f.unshare, args
}

// argsFile is a sealed memfd holding args NUL-separated, for bwrap's --args.
func argsFile(args []string) (*os.File, error) {
	fd, err := unix.MemfdCreate("bwrap-args", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "bwrap-args")
	var b bytes.Buffer
	for _, a := range args {
		b.WriteString(a)
		b.WriteByte(0)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return f, nil
}

func (s *Sandbox) unconfinedCommand(rel string, timeout time.Duration, argv []string) (runSpec, error) {
	var token [16]byte
	_, _ = rand.Read(token[:])
	marker := markerKey + "=" + hex.EncodeToString(token[:])
	args := append(s.f.prlimitArgs(timeout), argv...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(s.baseEnv(s.ws, filepath.Join(s.dir, "bin")), marker)
	cmd.Dir = filepath.Join(s.ws, filepath.FromSlash(rel))
	return runSpec{cmd: cmd, marker: marker}, nil
}

// killReason says why a command's process group was killed.
type killReason int

const (
	reasonNone killReason = iota
	reasonTimeout
	reasonOutput
	reasonContext
	reasonClosed
	reasonDisk
	reasonKilled // Process.Kill of a started command
)

var reasonNames = [...]string{"", "timeout", "output cap", "context ended", "sandbox closed", "disk quota", "killed"}

// proc is a started command. Its process group is killed only while the leader
// has not been reaped, so the pgid can never belong to someone else.
type proc struct {
	mu     sync.Mutex
	pid    int
	exited bool
	reason killReason
}

// setPID records the leader's pid, killing at once if a kill was already asked for.
func (p *proc) setPID(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pid = pid
	if p.reason != reasonNone {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// kill SIGKILLs the process group, recording the first reason.
func (p *proc) kill(r killReason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	if p.reason == reasonNone {
		p.reason = r
	}
	if p.pid > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// exit is called once the leader has exited but before it is reaped: it kills
// whatever is left in the group (background children) and stops further kills.
func (p *proc) exit() killReason {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.exited = true
	return p.reason
}

func (s *Sandbox) execute(ctx context.Context, spec runSpec, timeout time.Duration) (Result, error) {
	cfg := s.f.cfg
	cmd := spec.cmd
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: s.f.credential(),
	}
	if spec.gate != nil {
		s.f.namespaces(cmd.SysProcAttr)
	}
	if spec.cg != nil {
		defer spec.cg.remove()
		spec.cg.sysProcAttr(cmd.SysProcAttr)
	}
	cmd.WaitDelay = waitDelay
	p, all := &proc{}, new(atomic.Int64)
	if spec.stream != nil {
		p = spec.stream.proc
	}
	over := sync.OnceFunc(func() { p.kill(reasonOutput) })
	stdout := newCapture(cfg.OutputLimit, all, cfg.KillOutputLimit, over)
	stderr := newCapture(cfg.OutputLimit, all, cfg.KillOutputLimit, over)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	childFiles := slices.Clip(cmd.ExtraFiles)
	if spec.stream != nil {
		cmd.Stdin, cmd.Stdout = spec.stream.childStdin, spec.stream.childStdout
		childFiles = append(childFiles, spec.stream.childStdin, spec.stream.childStdout)
	}

	closeInheritedOnExec()
	start := time.Now()
	err := cmd.Start()
	for _, f := range childFiles {
		_ = f.Close() // the child holds its copy
	}
	if spec.status != nil {
		defer spec.status.Close()
	}
	if err != nil {
		if spec.gate != nil {
			spec.gate.close()
			return Result{}, fmt.Errorf("%w: starting bubblewrap in a pid namespace of its own: %v", ErrStart, err)
		}
		return Result{}, fmt.Errorf("%w: %v", ErrStart, err)
	}
	pid := cmd.Process.Pid
	p.setPID(pid)
	s.track(p)
	defer s.untrack(p)
	// A gate that cannot open leaves bwrap waiting for its options: it is killed,
	// and the command ends as one whose sandbox was never set up (ErrStart).
	var gateErr error
	if spec.gate != nil {
		if gateErr = spec.gate.open(pid, spec.cg); gateErr != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}

	var status chan bwrapStatus
	if spec.status != nil {
		status = make(chan bwrapStatus, 1)
		bwrapPID := 0
		if spec.direct {
			bwrapPID = pid
		}
		go func() { status <- readStatus(spec.status, bwrapPID) }()
	}
	done := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		var disk <-chan time.Time
		var diskTimer *time.Timer
		if cfg.DiskQuota >= 0 {
			diskTimer = time.NewTimer(DiskCheckInterval)
			defer diskTimer.Stop()
			disk = diskTimer.C
		}
		for {
			select {
			case <-ctx.Done():
				p.kill(reasonContext)
				return
			case <-timer.C:
				p.kill(reasonTimeout)
				return
			case <-disk:
				over, next := s.checkQuota(func() []int { return s.heldBy(pid, spec.cg) }, false)
				if over {
					p.kill(reasonDisk)
					return
				}
				diskTimer.Reset(next)
			case <-done:
				return
			}
		}
	})

	waitExited(pid)
	// Deleted-but-open files are counted while their holders live.
	overAtExit := false
	if cfg.DiskQuota >= 0 {
		overAtExit, _ = s.checkQuota(func() []int { return s.heldBy(pid, spec.cg) }, true)
	}
	reason := p.exit()
	if spec.cg != nil {
		spec.cg.kill()
	}
	if spec.marker != "" {
		sweep(spec.marker)
	}
	waitErr := cmd.Wait()
	close(done)
	watcher.Wait()
	ran := true
	if status != nil {
		// The stream ends when bwrap's processes are gone; the timer only guards
		// against a process that somehow kept its write end open.
		var st bwrapStatus
		timer := time.NewTimer(5 * time.Second)
		select {
		case st = <-status:
		case <-timer.C:
			_ = spec.status.SetReadDeadline(time.Now())
			st = <-status
		}
		timer.Stop()
		ran = st.ran
		st.waitNamespace()
	}

	res := Result{
		CommandResult: rollout.CommandResult{
			ExitCode:        exitCode(cmd.ProcessState),
			Stdout:          stdout.bytes(),
			Stderr:          stderr.bytes(),
			OutputTruncated: stdout.truncated() || stderr.truncated(),
			Unconfined:      cfg.Unconfined,
			Duration:        time.Since(start),
		},
		StdoutBytes: stdout.total,
		StderrBytes: stderr.total,
	}
	if cmd.ProcessState == nil {
		return res, fmt.Errorf("sandbox: run: %w", waitErr)
	}
	if waitErr != nil && !errors.As(waitErr, new(*exec.ExitError)) {
		// ErrWaitDelay (a pipe held open by a process that escaped the kill) or a
		// failed copy of Stdin: the command ran, and its result stands.
		cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "sandbox: wait", slog.Any("error", waitErr))
	}
	if reason != reasonNone {
		cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "sandbox: killed",
			slog.String("reason", reasonNames[reason]), slog.Int("pid", cmd.Process.Pid),
			slog.Int64("output_bytes", all.Load()), slog.Duration("elapsed", res.Duration))
	}
	if reason == reasonNone || reason == reasonOutput || reason == reasonTimeout {
		if overAtExit {
			reason = reasonDisk
		}
	}
	if spec.cg != nil && spec.cg.oomKills() > 0 {
		res.MemoryLimitHit = true
		res.Stderr = fmt.Appendf(res.Stderr, "\n[sandbox: the sandbox reached its memory limit of %d bytes; the kernel killed a process]\n",
			cfg.Limits.Memory)
	}
	if spec.cg != nil && spec.cg.pidsLimitHits() > 0 {
		res.ProcessLimitHit = true
		res.Stderr = fmt.Appendf(res.Stderr, "\n[sandbox: the sandbox reached its limit of %d processes; forks failed]\n",
			cfg.Limits.Processes)
	}
	switch reason {
	case reasonDisk:
		res.DiskQuotaExceeded = true
		res.Stderr = fmt.Appendf(res.Stderr, "\n[sandbox: the workspace exceeds its disk quota of %d bytes or %d entries; the command was stopped]\n",
			cfg.DiskQuota, MaxWorkspaceEntries)
	case reasonTimeout:
		res.TimedOut = true
		res.ExitCode = 124
	case reasonOutput:
		res.OutputKilled = true
	case reasonKilled:
		// The caller asked for it: the exit code says SIGKILL, and that is all.
	case reasonContext:
		return res, fmt.Errorf("sandbox: run: %w", ctx.Err())
	case reasonClosed:
		return res, ErrClosed
	case reasonNone:
		// A bwrap the OOM killer took (the sandbox's memory was full when the
		// command began) never reports an exit status either; that is the sandbox
		// at its limit, what its own processes left behind, not a set-up failure.
		if !ran && !res.MemoryLimitHit {
			msg := strings.TrimSpace(string(res.Stderr))
			if msg == "" && gateErr != nil {
				msg = gateErr.Error()
			}
			return res, fmt.Errorf("%w: %s", ErrStart, msg)
		}
	}
	return res, nil
}

// heldBy lists the processes whose deleted-but-open workspace files count towards a
// walked workspace's quota (none for a tmpfs workspace: the kernel counts them).
func (s *Sandbox) heldBy(leader int, cc *commandCgroup) []int {
	if s.mounted || s.f.cfg.DiskQuota < 0 {
		return nil
	}
	return commandPIDs(leader, cc)
}

// waitExited blocks until the process has exited, without reaping it.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// exitCode maps a wait status to the shell's convention: the exit status, or
// 128+signal.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// bwrapStatus is what bwrap's --json-status-fd said.
type bwrapStatus struct {
	// ran is true when bwrap reported the command's exit status; it does not when
	// it fails to set up the sandbox (after it has already reported the child pid).
	ran bool
	// pidfd refers to the sandbox's pid-namespace init (-1 when unknown).
	pidfd int
}

// readStatus reads bwrap's JSON status stream until it ends. When bwrap reports the
// namespace init's pid and bwrapPID is bwrap's (0: the reported pid is not of this
// pid namespace), it opens a pidfd on it, checking that it is still bwrap's child so
// that the pidfd cannot refer to a recycled pid.
func readStatus(r io.Reader, bwrapPID int) bwrapStatus {
	st := bwrapStatus{pidfd: -1}
	dec := json.NewDecoder(io.LimitReader(r, 1<<16))
	for {
		// A map, not a struct: encoding/json matches struct fields case-insensitively.
		var m map[string]json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return st
		}
		var code, child int
		if raw, ok := m["exit-code"]; ok && json.Unmarshal(raw, &code) == nil {
			st.ran = true
		}
		raw, ok := m["child-pid"]
		if !ok || bwrapPID <= 0 || json.Unmarshal(raw, &child) != nil || child <= 0 || st.pidfd >= 0 {
			continue
		}
		fd, err := unix.PidfdOpen(child, 0)
		if err != nil {
			continue
		}
		if parentPID(child) != bwrapPID {
			_ = unix.Close(fd)
			continue
		}
		st.pidfd = fd
	}
}

// waitNamespace waits (at most a second) for the pid namespace's init to exit. The
// kernel lets it finish exiting only after every other process in the namespace is
// gone, so afterwards nothing of the command is left.
func (st bwrapStatus) waitNamespace() {
	if st.pidfd < 0 {
		return
	}
	defer unix.Close(st.pidfd)
	fds := []unix.PollFd{{Fd: int32(st.pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(time.Second)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if n > 0 || (err != nil && err != unix.EINTR) || time.Now().After(deadline) {
			return
		}
	}
}

// parentPID reads a process's parent pid from /proc (0 when unknown).
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold
	// anything, are: state ppid …
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
