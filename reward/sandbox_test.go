package reward_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// dirSandbox is a test-only rollout.Sandbox: a temporary directory in which commands run
// as plain processes, without isolation. "python3" runs /usr/bin/python3.
type dirSandbox struct {
	dir string
	// failWrite and failRun inject sandbox failures.
	failWrite, failRun error
}

var _ rollout.Sandbox = (*dirSandbox)(nil)

func newDirSandbox(t *testing.T) *dirSandbox {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatalf("the verifier tests run /usr/bin/python3: %v", err)
	}
	return &dirSandbox{dir: t.TempDir()}
}

func (s *dirSandbox) path(name string) (string, error) {
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("path %q leaves the workspace", name)
	}
	return filepath.Join(s.dir, name), nil
}

func (s *dirSandbox) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	if s.failRun != nil {
		return rollout.CommandResult{}, s.failRun
	}
	argv := c.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", c.Shell}
	}
	if argv[0] == "python3" {
		argv = append([]string{"/usr/bin/python3"}, argv[1:]...)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(s.dir, c.Dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := rollout.CommandResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start), Unconfined: true}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if runCtx.Err() != nil {
		res.ExitCode, res.TimedOut = 124, true
		return res, nil
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return res, err
	}
	return res, nil
}

func (s *dirSandbox) ReadFile(name string) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

func (s *dirSandbox) WriteFile(name string, data []byte) error {
	if s.failWrite != nil {
		return s.failWrite
	}
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func (s *dirSandbox) FS() fs.FS { return os.DirFS(s.dir) }

func (s *dirSandbox) Close() error { return nil }

// dirFactory makes dirSandboxes.
type dirFactory struct{ t testing.TB }

func (f dirFactory) NewSandbox(context.Context) (rollout.Sandbox, error) {
	return &dirSandbox{dir: f.t.TempDir()}, nil
}

var _ rollout.Starter = (*dirSandbox)(nil)

// Start implements rollout.Starter: the command runs in its own process group, which
// is killed on timeout, on Kill and when ctx ends.
func (s *dirSandbox) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	if s.failRun != nil {
		return nil, s.failRun
	}
	if c.Stdin != nil {
		return nil, errors.New("Stdin is streamed")
	}
	argv := c.Argv
	if argv[0] == "python3" {
		argv = append([]string{"/usr/bin/python3"}, argv[1:]...)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(s.dir, c.Dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	p := &dirProcess{ctx: ctx, cmd: cmd, stdin: stdin, stdout: r, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	p.start = time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	go func() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-timer.C:
			p.timedOut.Store(true)
			p.Kill()
		case <-ctx.Done():
			p.Kill()
		case <-p.done:
		}
	}()
	return p, nil
}

type dirProcess struct {
	ctx      context.Context
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   *os.File
	stderr   *bytes.Buffer
	start    time.Time
	done     chan struct{}
	timedOut atomic.Bool
}

func (p *dirProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *dirProcess) Stdout() io.Reader     { return p.stdout }
func (p *dirProcess) Kill()                 { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

func (p *dirProcess) Wait() (rollout.CommandResult, error) {
	err := p.cmd.Wait()
	close(p.done)
	p.stdout.Close()
	res := rollout.CommandResult{Stderr: p.stderr.Bytes(), Duration: time.Since(p.start), Unconfined: true}
	var ee *exec.ExitError
	switch {
	case p.ctx.Err() != nil:
		return res, p.ctx.Err()
	case p.timedOut.Load():
		res.ExitCode, res.TimedOut = 124, true
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	case err != nil:
		return res, err
	}
	return res, nil
}
