package bwrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Without root the library cannot mount anything on the host, so an overlaid
// workspace lives in a user and mount namespace of its own, held by a small process
// (the holder) for the sandbox's life: unshare(1) makes the namespaces (the
// library's uid is root there), mount(8) mounts the overlay on the workspace
// directory with its layers named relative to the sandbox's directory (mountinfo
// shows "lowerdir=empty,upperdir=data,..."), and cat(1) waits on a pipe the library
// holds, so the holder ends when the sandbox closes or the library process dies. The
// holder has a pid namespace of its own too, with the script's shell as its init
// (which reaps what is orphaned there): every process of the sandbox is in it and dies
// with it. Commands enter those namespaces with
// nsenter(1) before bwrap starts; the host-side file methods reach the overlay
// through /proc/<holder>/root.
const (
	unsharePath = "/usr/bin/unshare"
	nsenterPath = "/usr/bin/nsenter"
	mountPath   = "/usr/bin/mount"
)

// holderScript mounts the overlay in the holder's namespaces, says so, and waits for
// its standard input to end. The shell stays (cat is its child, not exec'd): as the
// init of the holder's pid namespace it reaps what is orphaned there while it waits,
// bubblewrap's sandbox init after every command (see reaped in run.go).
const holderScript = mountPath + " -t overlay overlay -o lowerdir=" + overlayEmpty + ",upperdir=" + overlayData +
	",workdir=" + overlayWork + ",userxattr workspace && echo ready && cat >/dev/null"

// holderStart bounds how long a holder may take to mount its overlay.
const holderStart = 30 * time.Second

// overlayHolder is the process holding an unprivileged sandbox's namespaces.
type overlayHolder struct {
	cmd   *exec.Cmd
	stdin *os.File // the library's end of the holder's standard input
	out   *bufio.Reader
	outR  *os.File
	// stderr is what the holder's commands said, for errors.
	stderr *bytes.Buffer
	// ws is the overlaid workspace as the host reaches it: /proc/<pid>/root/<dir>/workspace.
	// The library never reaps the holder before stop, so if it dies its pid stays a
	// zombie's and cannot name another process.
	ws string
	// root is /proc/<pid>/root, where the host reaches the holder's mounts.
	root     string
	deadline time.Time
}

// startHolder makes the overlay's layers in dir and starts the holder of its
// namespaces, returning once the overlay is mounted on dir's workspace.
func startHolder(ctx context.Context, dir string) (*overlayHolder, error) {
	for _, d := range []string{overlayData, overlayEmpty, overlayWork} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	h, err := startHolderScript(ctx, dir, holderScript, nil)
	if err != nil {
		return nil, fmt.Errorf("mounting the workspace's overlay in a user namespace: %w", err)
	}
	return h, nil
}

// startHolderScript starts a holder running script (sh -c) in dir, in a user and
// mount namespace of its own where the library's uid is root, with env added to its
// environment, and returns once the script printed its first "ready" line.
// The script reads a line from its standard input before each further step
// ([overlayHolder.step]) and ends by waiting for its standard input to end.
func startHolderScript(ctx context.Context, dir, script string, env []string) (*overlayHolder, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return nil, err
	}
	stderr := &bytes.Buffer{}
	// A pid namespace of its own too, whose init is the script's shell: when that ends
	// (the library closed its standard input, or died), the kernel kills every process
	// in the namespace, so no command of the sandbox outlives the holder, however its
	// processes were started or reparented. --kill-child ends the init should
	// unshare itself be killed; --mount-proc gives the namespaces a /proc of that pid
	// namespace, as bubblewrap, run in them, reads its own entries there.
	cmd := exec.Command(unsharePath, "--user", "--map-root-user", "--mount", "--propagation", "private",
		"--pid", "--fork", "--kill-child", "--mount-proc", "--", "/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = dir, append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	// No Pdeathsig: it would fire when the OS thread that started the holder ends,
	// not the process. The pipe ends with the process, and cat with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		inW.Close()
		outW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting the sandbox's namespace: %w", err)
	}
	outW.Close()
	root := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root"
	h := &overlayHolder{cmd: cmd, stdin: inW, out: bufio.NewReader(outR), outR: outR, stderr: stderr,
		ws: root + filepath.Join(dir, "workspace"), root: root}
	h.deadline = time.Now().Add(holderStart)
	if d, ok := ctx.Deadline(); ok && d.Before(h.deadline) {
		h.deadline = d
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	return h, nil
}

// ready waits for the holder's next "ready" line. When the script fails instead, it
// stops the holder and returns what the script said.
func (h *overlayHolder) ready() error {
	_ = h.outR.SetReadDeadline(h.deadline)
	line, err := h.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = h.stop() // its standard error is complete once it is waited for
		return fmt.Errorf("%v: %s", errOr(err, "not ready"), bytes.TrimSpace(h.stderr.Bytes()))
	}
	return nil
}

// step lets the holder's script go on to its next step and waits until it is done.
func (h *overlayHolder) step() error {
	if _, err := h.stdin.Write([]byte("\n")); err != nil {
		_ = h.stop()
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(h.stderr.Bytes()))
	}
	return h.ready()
}

func errOr(err error, msg string) error {
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return errors.New(msg)
}

// stop ends the holder (the overlay goes with its namespace) and waits for it.
func (h *overlayHolder) stop() error {
	h.stdin.Close()
	h.outR.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
	return nil
}

// enter makes cmd, a bwrap command, start in the holder's namespaces: its user and
// mount namespaces, and the pid namespace its children are made in (nsenter forks the
// command into it). The holder's pid is unshare's, which the library reaps only in
// stop, so it names no other process; once the namespace's init has ended, no process
// can be made in it and the command fails.
func (h *overlayHolder) enter(cmd *exec.Cmd) {
	pid := strconv.Itoa(h.cmd.Process.Pid)
	args := append([]string{nsenterPath, "--target", pid, "--user", "--mount", "--pid=/proc/" + pid + "/ns/pid_for_children",
		"--preserve-credentials", "--"},
		cmd.Args...)
	args[len(args)-len(cmd.Args)] = cmd.Path
	cmd.Path, cmd.Args = nsenterPath, args
}

// checkHolder tries an unprivileged overlaid workspace in base, to learn whether
// walked workspaces can hide their host path without root.
func checkHolder(ctx context.Context, base string) error {
	for _, p := range []string{unsharePath, nsenterPath, mountPath} {
		if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(base, "agenticopd-mountcheck-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "workspace"), 0o755); err != nil {
		return err
	}
	h, err := startHolder(ctx, dir)
	if err != nil {
		return err
	}
	defer h.stop()
	probe := exec.Command("/bin/sh", "-c", "echo ok > ws-check && rm ws-check")
	probe.Dir = h.ws
	if out, err := probe.CombinedOutput(); err != nil {
		return fmt.Errorf("writing through the overlay: %v: %s", err, out)
	}
	return nil
}
