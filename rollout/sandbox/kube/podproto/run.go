package podproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/agentic-opd/agenticopd/rollout"
)

// ErrInvalidCommand wraps a [rollout.Command] that cannot be run: neither Argv nor
// Shell, a negative timeout, a working directory outside the workspace.
var ErrInvalidCommand = errors.New("podproto: invalid command")

// runRequest checks cmd and builds its request.
func (c *Client) runRequest(cmd rollout.Command) (RunRequest, error) {
	req := RunRequest{Root: c.cfg.Root, Env: c.cfg.Env, OutputLimit: c.cfg.OutputLimit, KillOutputLimit: c.cfg.KillOutputLimit}
	switch {
	case len(cmd.Argv) > 0:
		if cmd.Argv[0] == "" {
			return req, fmt.Errorf("%w: empty program name in Argv", ErrInvalidCommand)
		}
		req.Argv = cmd.Argv
	case strings.TrimSpace(cmd.Shell) == "":
		return req, fmt.Errorf("%w: neither Argv nor Shell is set", ErrInvalidCommand)
	default:
		req.Argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	if cmd.Dir != "" && cmd.Dir != "." {
		d := path.Clean(cmd.Dir)
		if !localPath(d) {
			return req, fmt.Errorf("%w: working directory %q is not inside the workspace", ErrInvalidCommand, cmd.Dir)
		}
		req.Dir = d
	}
	if cmd.Timeout < 0 {
		return req, fmt.Errorf("%w: negative timeout %v", ErrInvalidCommand, cmd.Timeout)
	}
	req.Timeout = cmd.Timeout
	if req.Timeout == 0 {
		req.Timeout = c.cfg.Timeout
	}
	req.Timeout = min(req.Timeout, c.cfg.MaxTimeout)
	var id [12]byte
	_, _ = rand.Read(id[:])
	req.ID = hex.EncodeToString(id[:])
	return req, nil
}

// localPath reports whether a clean slash path stays inside the directory it is
// relative to.
func localPath(p string) bool {
	return p != "" && p[0] != '/' && p != ".." && !strings.HasPrefix(p, "../")
}

// Run runs cmd in the pod, as [rollout.Sandbox.Run] says: a command that fails,
// times out (exit code 124, TimedOut) or is killed for its output (OutputKilled) is a
// result. The error is for a command that cannot be run ([ErrInvalidCommand],
// [ErrStart]), for the pod ([ErrNoResult]: no result came back) or for ctx: when ctx
// ends the command's tree is killed in the pod and the partial result comes back
// with ctx's error.
func (c *Client) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	req, err := c.runRequest(cmd)
	if err != nil {
		return rollout.CommandResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return rollout.CommandResult{}, fmt.Errorf("podproto: run: %w", err)
	}
	req.Stdin = true
	stdin := newHeldStdin(stdinFrames(cmd.Stdin))
	defer close(stdin.release)
	var stdout, stderr []byte
	limit := 2*c.cfg.OutputLimit + 256 // head, tail and the cut marker
	handle := func(kind byte, p []byte) error {
		switch kind {
		case FrameStdout:
			stdout = append(stdout, p...)
		case FrameStderr:
			stderr = append(stderr, p...)
		default:
			return fmt.Errorf("%w: an unexpected frame of kind %q", ErrFrame, kind)
		}
		if len(stdout) > limit || len(stderr) > limit {
			return fmt.Errorf("%w: more output than the cap of %d bytes", ErrFrame, c.cfg.OutputLimit)
		}
		return nil
	}
	k := c.killOnDone(ctx, req.ID)
	res, err := c.call(ctx, OpRun, req, stdin, handle)
	k.stop()
	out := commandResult(res)
	out.Stdout, out.Stderr = stdout, stderr
	if err != nil {
		return out, err
	}
	if res.Killed && ctx.Err() != nil {
		return out, fmt.Errorf("podproto: run: %w", ctx.Err())
	}
	return out, nil
}

func commandResult(r Result) rollout.CommandResult {
	return rollout.CommandResult{
		ExitCode:        r.ExitCode,
		TimedOut:        r.TimedOut,
		OutputTruncated: r.OutputTruncated,
		OutputKilled:    r.OutputKilled,
		Duration:        r.Duration,
	}
}

// killer kills a run when its context ends before the call does.
type killer struct {
	ctx    context.Context
	kill   func()
	stopFn func() bool
	wg     sync.WaitGroup
}

// killOnDone arranges for run id to be killed in the pod if ctx ends; stop undoes it
// and waits for a kill already under way.
func (c *Client) killOnDone(ctx context.Context, id string) *killer {
	k := &killer{ctx: ctx, kill: func() { _ = c.Kill(context.WithoutCancel(ctx), id) }}
	k.wg.Add(1)
	k.stopFn = context.AfterFunc(ctx, func() {
		defer k.wg.Done()
		k.kill()
	})
	return k
}

// stop ends the arrangement once the call is over. A context is done (its Done
// closed, which may be what ended the call) a moment before its after-funcs start,
// so stop can stop the kill of a context already done: it then kills here, since
// an exec that cannot close its stdin does not end the run in the pod by itself.
func (k *killer) stop() {
	if k.stopFn() {
		k.wg.Done() // the kill never started
		if k.ctx.Err() != nil {
			k.kill()
		}
	}
	k.wg.Wait()
}

// Kill kills run id in the pod (its whole process tree; its call then reports
// Killed and exit code 137); "" kills every run. It waits for the kill exec (at
// most KillTimeout), not for the run to end. A run already over is no error.
func (c *Client) Kill(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.KillTimeout)
	defer cancel()
	_, err := c.call(ctx, OpKill, KillRequest{ID: id}, nil, nil)
	return err
}

// Start starts cmd in the pod, as [rollout.Starter.Start] says: stdin and stdout
// are streamed through the exec, stderr is captured under the output cap, and the
// command's tree is killed at its timeout, by [rollout.Process.Kill], or when ctx
// ends.
func (c *Client) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	if cmd.Stdin != nil {
		return nil, fmt.Errorf("%w: Command.Stdin must be nil for Start; write to Process.Stdin", ErrInvalidCommand)
	}
	req, err := c.runRequest(cmd)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("podproto: start: %w", err)
	}
	req.Stdin, req.Stream = true, true
	p := &process{c: c, id: req.ID, ctx: ctx, done: make(chan struct{})}
	p.inR, p.inW = io.Pipe()
	p.outR, p.outW = io.Pipe()
	p.stdin = &stdinWriter{w: p.inW}
	limit := 2*c.cfg.OutputLimit + 256
	handle := func(kind byte, b []byte) error {
		switch kind {
		case FrameStdout:
			// A reader that went away (Wait closed Stdout) drops the rest.
			_, _ = p.outW.Write(b)
		case FrameStderr:
			p.stderr = append(p.stderr, b...)
			if len(p.stderr) > limit {
				return fmt.Errorf("%w: more output than the cap of %d bytes", ErrFrame, c.cfg.OutputLimit)
			}
		default:
			return fmt.Errorf("%w: an unexpected frame of kind %q", ErrFrame, kind)
		}
		return nil
	}
	k := c.killOnDone(ctx, req.ID)
	go func() {
		defer close(p.done)
		p.res, p.err = c.call(ctx, OpRun, req, p.inR, handle)
		k.stop()
		_ = p.inW.Close()
		_ = p.outW.Close()
	}()
	return p, nil
}

// process is a started command: its call runs in a goroutine that Wait waits for.
type process struct {
	c      *Client
	id     string
	ctx    context.Context
	inR    *io.PipeReader
	inW    *io.PipeWriter
	outR   *io.PipeReader
	outW   *io.PipeWriter
	stdin  *stdinWriter
	stderr []byte // written by the call's goroutine until done
	done   chan struct{}
	res    Result
	err    error
	kills  sync.WaitGroup
	once   sync.Once
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.outR }

// Kill kills the command's tree in the pod by a second exec; it does not wait.
func (p *process) Kill() {
	p.once.Do(func() {
		p.kills.Go(func() { _ = p.c.Kill(context.WithoutCancel(p.ctx), p.id) })
	})
}

func (p *process) Wait() (rollout.CommandResult, error) {
	_ = p.outR.Close() // output not read by now is dropped, so the call can end
	<-p.done
	p.kills.Wait()
	_ = p.stdin.Close()
	out := commandResult(p.res)
	out.Stderr = p.stderr
	if p.err != nil {
		return out, p.err
	}
	if p.res.Killed && p.ctx.Err() != nil {
		return out, fmt.Errorf("podproto: run: %w", p.ctx.Err())
	}
	return out, nil
}

// stdinWriter frames what is written to a started command's stdin; Close sends
// FrameStdinEnd (end of file for the command) and leaves the stream open.
type stdinWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (s *stdinWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, io.ErrClosedPipe
	}
	if len(b) == 0 {
		return 0, nil
	}
	if err := WriteFrame(s.w, FrameStdin, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (s *stdinWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := WriteFrame(s.w, FrameStdinEnd, nil); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return err
	}
	return nil
}
