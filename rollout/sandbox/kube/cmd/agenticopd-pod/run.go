package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// activityEvery is how often a running command marks activity for serve.
const activityEvery = 5 * time.Second

// Why a command was killed; the first reason wins.
const (
	reasonNone int32 = iota
	reasonTimeout
	reasonOutput
	reasonKilled
	reasonClientLost
)

// runCommand runs req's command as a child of this process, which is a child
// subreaper, so everything the command starts (setsid or not) stays its descendant;
// at the end, whatever is left of the tree is killed, so no process outlives its
// command.
func runCommand(req podproto.RunRequest, stdin io.Reader, out *frameOut) podproto.Result {
	const op = podproto.OpRun
	if len(req.Argv) == 0 || req.Timeout <= 0 || req.OutputLimit <= 0 || req.KillOutputLimit < int64(req.OutputLimit) {
		return fail(op, "", &podproto.Error{Kind: podproto.KindInvalid, Message: "bad run request (argv, timeout, output limits)"})
	}
	dir, err := workDir(req.Root, req.Dir)
	if err != nil {
		return fail(op, req.Dir, err)
	}
	prog := req.Argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = exec.LookPath(prog); err != nil {
			return fail(op, "", &podproto.Error{Kind: podproto.KindStart, Message: err.Error()})
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(op, "", fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err))
	}
	unregister := register(req.ID)
	defer unregister()
	kill := make(chan os.Signal, 1)
	signal.Notify(kill, syscall.SIGUSR1)
	defer signal.Stop(kill)

	var total atomic.Int64
	p := &tree{}
	stop := p.kill
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(op, "", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(op, "", err)
	}
	stdout := newCapture(req.OutputLimit)
	stderr := newCapture(req.OutputLimit)
	over := func(n int) {
		if total.Add(int64(n)) > req.KillOutputLimit {
			stop(reasonOutput)
		}
	}
	var copiers sync.WaitGroup
	copiers.Go(func() {
		pump(outR, func(b []byte) {
			if req.Stream {
				_ = out.frame(podproto.FrameStdout, b)
				stdout.total += int64(len(b))
			} else {
				stdout.Write(b)
			}
			over(len(b))
		})
	})
	copiers.Go(func() { pump(errR, func(b []byte) { stderr.Write(b); over(len(b)) }) })

	files := []*os.File{nil, outW, errW}
	var inW *os.File
	if req.Stdin {
		inR, w, err := os.Pipe()
		if err != nil {
			return fail(op, "", err)
		}
		files[0], inW = inR, w
		defer inR.Close()
	} else {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return fail(op, "", err)
		}
		files[0] = null
		defer null.Close()
	}
	env := req.Env
	if env == nil {
		env = os.Environ()
	}
	start := time.Now()
	proc, err := os.StartProcess(prog, req.Argv, &os.ProcAttr{Dir: dir, Env: env, Files: files,
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}})
	outW.Close()
	errW.Close()
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		copiers.Wait()
		return fail(op, "", &podproto.Error{Kind: podproto.KindStart, Message: err.Error()})
	}
	p.setLeader(proc.Pid)
	files[0].Close()
	// The command, not this helper nor PID 1, is the OOM killer's victim where the
	// kernel kills single processes.
	_ = os.WriteFile("/proc/"+strconv.Itoa(proc.Pid)+"/oom_score_adj", []byte("1000"), 0)
	if inW != nil {
		go feedStdin(stdin, inW, func() { stop(reasonClientLost) })
	}
	done := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		timer := time.NewTimer(req.Timeout)
		defer timer.Stop()
		tick := time.NewTicker(activityEvery)
		defer tick.Stop()
		for {
			select {
			case <-timer.C:
				stop(reasonTimeout)
			case <-kill:
				stop(reasonKilled)
			case <-tick.C:
				touchActivity()
			case <-done:
				return
			}
		}
	})
	ws := reapUntil(proc.Pid)
	duration := time.Since(start)
	p.exited()
	reapAll()
	close(done)
	watcher.Wait()
	copiers.Wait()

	res := podproto.Result{
		ExitCode:        exitCode(ws),
		OutputTruncated: stdout.truncated() || stderr.truncated(),
		StdoutBytes:     stdout.total,
		StderrBytes:     stderr.total,
		Duration:        duration,
	}
	switch p.why() {
	case reasonTimeout:
		res.TimedOut, res.ExitCode = true, 124
	case reasonOutput:
		res.OutputKilled = true
	case reasonKilled:
		res.Killed = true
	case reasonClientLost:
		res.ClientLost = true
	}
	if !req.Stream {
		if b := stdout.bytes(); len(b) > 0 {
			_ = out.frame(podproto.FrameStdout, b)
		}
	}
	if b := stderr.bytes(); len(b) > 0 {
		_ = out.frame(podproto.FrameStderr, b)
	}
	return res
}

// workDir is the command's working directory: dir beneath root, which must be a
// directory there (symlinks inside the workspace are followed, none out of it).
func workDir(root, dir string) (string, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if dir == "" {
		dir = "."
	}
	fi, err := r.Stat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &podproto.Error{Kind: podproto.KindNotDir, Message: "the working directory is not a directory"}
	}
	return filepath.Join(root, dir), nil
}

// feedStdin copies FrameStdin frames to the command's stdin and closes it at
// FrameStdinEnd. The client holds its stream open until the call ends, so a stream
// that ends (or breaks) before then means the client is gone: lost is called.
func feedStdin(r io.Reader, w *os.File, lost func()) {
	fr := podproto.NewFrameReader(r, podproto.StdinKinds)
	open := true
	defer func() {
		if open {
			w.Close()
		}
	}()
	for {
		kind, b, err := fr.Next()
		if err != nil {
			lost()
			return
		}
		switch {
		case kind == podproto.FrameStdinEnd && open:
			w.Close()
			open = false
		case kind == podproto.FrameStdin && open:
			if _, err := w.Write(b); err != nil {
				w.Close() // the command closed its stdin: drop the rest
				open = false
			}
		}
	}
}

// pump reads r to its end, handing each read to fn.
func pump(r *os.File, fn func([]byte)) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			fn(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// reapUntil reaps children (orphans of the command included) until pid has
// exited, and returns its status.
func reapUntil(pid int) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || got == pid {
			return ws
		}
	}
}

// reapAll reaps every child left (after the tree was killed) until none is.
func reapAll() {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
	}
}

func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// tree is the command's process tree: the leader and every descendant of this
// helper.
type tree struct {
	mu     sync.Mutex
	leader int
	reason int32
	done   bool
}

func (t *tree) setLeader(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = pid
	if t.reason != reasonNone {
		killDescendants()
	}
}

// kill kills the whole tree for reason r (the first reason is kept), unless the
// leader has already exited on its own.
func (t *tree) kill(r int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	if t.reason == reasonNone {
		t.reason = r
	}
	if t.leader > 0 {
		killDescendants()
	}
}

func (t *tree) why() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// exited is called once the leader has been reaped: what is left of the tree (the
// command's background processes) is killed.
func (t *tree) exited() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	killDescendants()
}

// killDescendants SIGKILLs every live descendant of this process, walking /proc
// again until it finds none: a process that forked while the last pass ran is
// found by the next. Descendants that called setsid are found too: this process
// is their subreaper. Zombies are left to the reaper.
func killDescendants() {
	self := os.Getpid()
	for range 1000 {
		pids := descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// descendants lists the live (not zombie) descendants of pid from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state := procStat(p)
		if ppid > 0 && state != 'Z' && state != 'X' {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat reads a process's parent pid and state from /proc/PID/stat.
func procStat(pid int) (int, byte) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// The fields after the command name, which is in parentheses and may hold
	// anything, are: state ppid …
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) == 0 {
		return 0, 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid, f[0][0]
}

// register records this run's pid under its id, for OpKill; the returned function
// removes it.
func register(id string) func() {
	if id == "" || strings.ContainsAny(id, "/.") {
		return func() {}
	}
	dir := filepath.Join(stateDir(), "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}
	}
	p := filepath.Join(dir, id)
	if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return func() {}
	}
	return func() { _ = os.Remove(p) }
}

// killRuns signals the helper of run req.ID (every run when it is ""), which then
// kills its command's tree and reports Killed. A pid is signalled only when its
// command line holds the run's id, so a recycled pid is left alone.
func killRuns(req podproto.KillRequest) podproto.Result {
	dir := filepath.Join(stateDir(), "runs")
	var ids []string
	if req.ID != "" {
		if strings.ContainsAny(req.ID, "/.") {
			return fail(podproto.OpKill, "", &podproto.Error{Kind: podproto.KindInvalid, Message: "bad id"})
		}
		ids = []string{req.ID}
	} else if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			ids = append(ids, e.Name())
		}
	}
	n := 0
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(`"`+id+`"`)) {
			continue
		}
		if unix.Kill(pid, unix.SIGUSR1) == nil {
			n++
		}
	}
	return podproto.Result{Signalled: n}
}
