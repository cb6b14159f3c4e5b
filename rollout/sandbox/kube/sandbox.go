package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// endWait bounds how long a call whose exec ended without a result waits for the
// pod's status to say why (the kubelet reports an OOM kill or an eviction a little
// after the exec stream breaks).
const endWait = 15 * time.Second

// ErrSandboxEnded is wrapped by the errors of file calls on a sandbox whose pod its
// own commands ended (out of memory, over its storage, past its deadline). Commands
// on such a sandbox are not errors: they report the end in their result.
var ErrSandboxEnded = errors.New("kube: the sandbox's pod has ended")

// Sandbox is one pod. It implements [rollout.Sandbox], [rollout.Starter],
// [rollout.Restorer] and [rollout.Searcher]; every call is an exec of the helper in
// the pod. It is safe for concurrent use.
//
// What the agent's commands can do to their pod (fill its memory until the
// container is OOM-killed, exceed its ephemeral storage until it is evicted, outlive
// its deadline, end the helper) ends the sandbox and is never an error: the command
// that was running, and every later one, reports exit code 137 with a note in
// Stderr, [Sandbox.Ended] says which, Restore does nothing, and the file calls fail
// with [ErrSandboxEnded]. A pod gone for another reason is an error wrapping
// [ErrPodLost], the factory's.
type Sandbox struct {
	f      *Factory
	pod    string
	root   string
	client *podproto.Client
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	ended  *podState
}

var (
	_ rollout.Sandbox  = (*Sandbox)(nil)
	_ rollout.Starter  = (*Sandbox)(nil)
	_ rollout.Restorer = (*Sandbox)(nil)
	_ rollout.Searcher = (*Sandbox)(nil)
)

func newSandbox(f *Factory, pod, root string) (*Sandbox, error) {
	c, err := podproto.NewClient(f.exec.pod(pod), podproto.Config{
		Root:            root,
		Timeout:         f.cfg.Timeout,
		MaxTimeout:      f.cfg.MaxTimeout,
		OutputLimit:     f.cfg.OutputLimit,
		KillOutputLimit: f.cfg.KillOutputLimit,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sandbox{f: f, pod: pod, root: root, client: c, ctx: ctx, cancel: cancel}, nil
}

// Pod is the name of the sandbox's pod.
func (s *Sandbox) Pod() string { return s.pod }

// Dir is the workspace's absolute path in the pod.
func (s *Sandbox) Dir() string { return s.root }

// Ended says whether the agent's commands ended the pod, and how: "" while it
// runs, else [EndMemory], [EndStorage], [EndDeadline] or [EndExited].
func (s *Sandbox) Ended() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		return ""
	}
	return s.ended.kind
}

// state returns whether the sandbox is closed and how it ended.
func (s *Sandbox) state() (bool, *podState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed, s.ended
}

// callCtx is ctx that also ends at Close.
func (s *Sandbox) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// endedResult is the result of a command in a sandbox its commands ended.
func endedResult(st *podState) rollout.CommandResult {
	return rollout.CommandResult{
		ExitCode: 137,
		Stderr:   fmt.Appendf(nil, "\n[sandbox: %s; the sandbox has ended]\n", st.reason),
	}
}

// classifyLoss is called when a call's exec ended without a result: it waits a
// little for the pod's status and returns the agent-caused end it shows (recorded),
// or the error to return.
func (s *Sandbox) classifyLoss(ctx context.Context, callErr error) (*podState, error) {
	if closed, _ := s.state(); closed {
		return nil, ErrClosed
	}
	wctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	st, _ := s.f.watch.wait(wctx, s.pod, func(st podState) bool { return st.phase != phaseReady && st.phase != phasePending })
	if closed, _ := s.state(); closed {
		return nil, ErrClosed
	}
	switch st.phase {
	case phaseAgent:
		s.mu.Lock()
		if s.ended == nil {
			s.ended = &st
		}
		e := s.ended
		s.mu.Unlock()
		return e, nil
	case phaseLost, phaseStartFail:
		return nil, fmt.Errorf("%w: pod %s: %s: %w", ErrPodLost, s.pod, st.reason, callErr)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, callErr
}

// precheck returns ErrClosed, or the state of an ended sandbox.
func (s *Sandbox) precheck() (*podState, error) {
	closed, ended := s.state()
	if closed {
		return nil, ErrClosed
	}
	return ended, nil
}

// Run runs cmd in the pod; see [rollout.Sandbox]. Errors: [podproto.ErrInvalidCommand]
// (a bad command), [ErrClosed], [ErrPodLost], ctx's.
func (s *Sandbox) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	ended, err := s.precheck()
	if err != nil {
		return rollout.CommandResult{}, err
	}
	if ended != nil {
		return endedResult(ended), nil
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := s.client.Run(cctx, cmd)
	if err == nil {
		return res, nil
	}
	return s.runError(ctx, res, err)
}

// runError maps the error of a command's call.
func (s *Sandbox) runError(ctx context.Context, res rollout.CommandResult, err error) (rollout.CommandResult, error) {
	if closed, _ := s.state(); closed {
		return res, ErrClosed
	}
	if errors.Is(err, podproto.ErrNoResult) {
		st, lerr := s.classifyLoss(ctx, err)
		if lerr != nil {
			return res, lerr
		}
		out := endedResult(st)
		out.Stdout = res.Stdout
		out.Stderr = append(res.Stderr, out.Stderr...)
		out.Duration = res.Duration
		return out, nil
	}
	return res, err
}

// Start starts cmd in the pod; see [rollout.Starter].
func (s *Sandbox) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	ended, err := s.precheck()
	if err != nil {
		return nil, err
	}
	if ended != nil {
		return endedProcess{res: endedResult(ended)}, nil
	}
	cctx, cancel := s.callCtx(ctx)
	p, err := s.client.Start(cctx, cmd)
	if err != nil {
		cancel()
		return nil, err
	}
	return &process{Process: p, s: s, ctx: ctx, cancel: cancel}, nil
}

type process struct {
	rollout.Process
	s      *Sandbox
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *process) Wait() (rollout.CommandResult, error) {
	defer p.cancel()
	res, err := p.Process.Wait()
	if err == nil {
		return res, nil
	}
	return p.s.runError(p.ctx, res, err)
}

// endedProcess is a command of a sandbox that has ended: it never ran.
type endedProcess struct{ res rollout.CommandResult }

func (endedProcess) Stdin() io.WriteCloser                  { return discard{} }
func (endedProcess) Stdout() io.Reader                      { return strings.NewReader("") }
func (endedProcess) Kill()                                  {}
func (p endedProcess) Wait() (rollout.CommandResult, error) { return p.res, nil }

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }

// fileError maps the error of a file call.
func (s *Sandbox) fileError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if closed, _ := s.state(); closed {
		return ErrClosed
	}
	if errors.Is(err, podproto.ErrNoResult) {
		st, lerr := s.classifyLoss(ctx, err)
		if lerr != nil {
			return lerr
		}
		return fmt.Errorf("%w: %s", ErrSandboxEnded, st.reason)
	}
	return err
}

// fileCall runs a file call bounded by the file timeout and Close.
func (s *Sandbox) fileCall(fn func(ctx context.Context) error) error {
	ended, err := s.precheck()
	if err != nil {
		return err
	}
	if ended != nil {
		return fmt.Errorf("%w: %s", ErrSandboxEnded, ended.reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.client.Config().FileTimeout)
	defer cancel()
	cctx, ccancel := s.callCtx(ctx)
	defer ccancel()
	return s.fileError(ctx, fn(cctx))
}

// ReadFile reads a workspace file through the helper, which refuses paths that
// leave the workspace, symlinks out of it, FIFOs and devices.
func (s *Sandbox) ReadFile(name string) ([]byte, error) {
	var b []byte
	err := s.fileCall(func(ctx context.Context) (err error) {
		b, err = s.client.ReadFile(ctx, name)
		return err
	})
	return b, err
}

// WriteFile writes a workspace file through the helper, creating parent
// directories.
func (s *Sandbox) WriteFile(name string, data []byte) error {
	return s.fileCall(func(ctx context.Context) error { return s.client.WriteFile(ctx, name, data) })
}

// FS is a read-only view of the workspace, one exec per Open, Stat or ReadDir.
func (s *Sandbox) FS() fs.FS {
	if closed, ended := s.state(); closed || ended != nil {
		return errFS{s}
	}
	return s.client.FS()
}

// errFS is the FS of a closed or ended sandbox.
type errFS struct{ s *Sandbox }

func (e errFS) Open(name string) (fs.File, error) {
	_, err := e.s.precheck()
	if err == nil {
		err = ErrSandboxEnded
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: err}
}

// Restore gives the workspace's owner back what the agent's code took (the
// helper's walk, bounded by Config.RestoreTimeout; past it the error wraps
// [rollout.ErrRestoreBudget]). A sandbox its commands ended has nothing to restore:
// nil.
func (s *Sandbox) Restore(ctx context.Context) error {
	ended, err := s.precheck()
	if err != nil {
		return err
	}
	if ended != nil {
		return nil
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	err = s.client.Restore(cctx)
	if err == nil {
		return nil
	}
	if ferr := s.fileError(ctx, err); errors.Is(ferr, ErrSandboxEnded) {
		return nil
	} else {
		return ferr
	}
}

// SearchFiles implements [rollout.Searcher]: search_files runs in the pod.
func (s *Sandbox) SearchFiles(ctx context.Context, q rollout.SearchQuery) (rollout.SearchResult, error) {
	ended, err := s.precheck()
	if err != nil {
		return rollout.SearchResult{}, err
	}
	if ended != nil {
		return rollout.SearchResult{}, fmt.Errorf("%w: %s", ErrSandboxEnded, ended.reason)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := s.client.SearchFiles(cctx, q)
	return res, s.fileError(ctx, err)
}

// Close ends every call under way and deletes the pod (at once: grace 0). It is
// idempotent; calls after it fail with [ErrClosed].
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.f.deletePod(s.pod)
	return nil
}
