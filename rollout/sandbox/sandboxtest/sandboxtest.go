// Package sandboxtest provides a [rollout.SandboxFactory] whose commands do not run:
// each command waits a fixed latency on a timer, using no CPU, and answers what a
// function of the command says. It is for benchmarks and tests of the code around a
// sandbox (the agent loop, the env's concurrency), where a real sandbox's process
// start-up would hide what is measured, and it confines nothing.
//
// Files are real: every sandbox has its own temporary workspace directory on the host,
// reached through an [os.Root], so ReadFile, WriteFile and FS behave as with the
// bubblewrap sandbox and paths cannot leave the workspace. Commands never see those
// files unless the Exec function reads them. Because commands do not run, the
// conformance checks of package rollouttest do not apply, and the sandbox does not
// implement [rollout.Starter]: the canonical verification of package reward, which
// talks to real processes, cannot run in it.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// ExecFunc answers a command: what it would print and its exit code. It is called
// after the latency has passed, from the goroutine that called Run, and must be safe
// for concurrent use. The workspace is given read-only.
type ExecFunc func(cmd rollout.Command, workspace fs.FS) rollout.CommandResult

// Config configures a [Factory]. The zero value makes sandboxes whose commands return
// at once with exit code 0 and no output.
type Config struct {
	// Latency is how long every command takes, on a timer (no CPU is used).
	Latency time.Duration
	// Exec answers each command; nil means exit code 0 and no output.
	Exec ExecFunc
	// Dir is the directory the workspaces are made in; "" means os.TempDir().
	Dir string
}

// Factory makes sandboxes with fixed-latency commands. It is safe for concurrent use.
type Factory struct {
	cfg Config
}

// New returns a Factory for cfg. A negative Latency is a programmer error and panics.
func New(cfg Config) *Factory {
	if cfg.Latency < 0 {
		panic(fmt.Sprintf("sandboxtest: New: Latency is %v, want ≥ 0", cfg.Latency))
	}
	return &Factory{cfg: cfg}
}

// NewSandbox makes a sandbox with a fresh workspace directory; Close removes it.
func (f *Factory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(f.cfg.Dir, "sandboxtest-")
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: workspace: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("sandboxtest: workspace: %w", err)
	}
	return &Sandbox{cfg: f.cfg, dir: dir, root: root, closed: make(chan struct{})}, nil
}

// ErrClosed is returned by a Sandbox's methods after Close.
var ErrClosed = errors.New("sandboxtest: sandbox is closed")

// Sandbox is one workspace of a [Factory]. It is safe for concurrent use.
type Sandbox struct {
	cfg  Config
	dir  string
	root *os.Root

	once   sync.Once
	closed chan struct{}
	err    error
}

var _ rollout.Sandbox = (*Sandbox)(nil)

// Run waits the factory's latency (or cmd.Timeout when shorter: the command is then
// reported as timed out with exit code 124), then answers with the factory's Exec.
// It returns an error when ctx ends or the sandbox is closed during the wait.
func (s *Sandbox) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	select {
	case <-s.closed:
		return rollout.CommandResult{}, ErrClosed
	default:
	}
	wait, timedOut := s.cfg.Latency, false
	if cmd.Timeout > 0 && cmd.Timeout < wait {
		wait, timedOut = cmd.Timeout, true
	}
	start := time.Now()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return rollout.CommandResult{}, ctx.Err()
		case <-s.closed:
			return rollout.CommandResult{}, ErrClosed
		}
	}
	if timedOut {
		return rollout.CommandResult{ExitCode: 124, TimedOut: true, Duration: time.Since(start)}, nil
	}
	var res rollout.CommandResult
	if s.cfg.Exec != nil {
		res = s.cfg.Exec(cmd, s.root.FS())
	}
	res.Duration = time.Since(start)
	return res, nil
}

// ReadFile reads a workspace file.
func (s *Sandbox) ReadFile(name string) ([]byte, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return s.root.ReadFile(filepath.Clean(name))
}

// WriteFile writes a workspace file, creating parent directories.
func (s *Sandbox) WriteFile(name string, data []byte) error {
	if s.isClosed() {
		return ErrClosed
	}
	name = filepath.Clean(name)
	if dir := filepath.Dir(name); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return s.root.WriteFile(name, data, 0o644)
}

// FS is a read-only view of the workspace.
func (s *Sandbox) FS() fs.FS { return s.root.FS() }

// Close ends the commands waiting in Run and removes the workspace. It is idempotent.
func (s *Sandbox) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.err = errors.Join(s.root.Close(), os.RemoveAll(s.dir))
	})
	return s.err
}

func (s *Sandbox) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}
