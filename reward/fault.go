package reward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// Which failures of a verification are the solution's.
//
// A verification uses two sandboxes: the rollout's, where the agent worked and the
// solution runs, and a fresh one of the same factory for the tests. Everything the
// agent did happened in the first: it may have filled its memory (a tmpfs workspace
// is memory), its workspace, taken its own permissions away. A failure there is the
// solution's fault, scored as such, unless the infrastructure itself is broken, which
// a control run shows: the same interpreter in another fresh sandbox of the factory.
// A failure of the tests' sandbox, of the factory, or of the control is not the
// agent's doing and stays an error.

// side says in which sandbox of a verification an error arose.
type side int

const (
	sideSolution side = iota + 1 // the rollout's sandbox
	sideTests                    // the tests' fresh sandbox, or the factory making it
)

// sideError marks an error with the sandbox it came from.
type sideError struct {
	side side
	err  error
}

func (e *sideError) Error() string { return e.err.Error() }
func (e *sideError) Unwrap() error { return e.err }

func mark(s side, err error) error {
	if err == nil {
		return nil
	}
	return &sideError{side: s, err: err}
}

// sideOf is the side an error chain was marked with (0 when unmarked). A chain
// holding both (errors.Join of the two processes' errors) is the tests'.
func sideOf(err error) side {
	found := side(0)
	var walk func(error)
	walk = func(err error) {
		for err != nil {
			if se, ok := err.(*sideError); ok {
				found = max(found, se.side)
			}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					walk(e)
				}
				return
			}
			err = errors.Unwrap(err)
		}
	}
	walk(err)
	return found
}

// watch marks the errors of both sides of one verification and notes whether the
// test process's harness started (it wrote a line on its channel: its hello).
type watch struct {
	testSpoke  atomic.Bool
	solStarted atomic.Bool
}

// solution wraps the rollout's sandbox; it has Start only when sb has it.
func (w *watch) solution(sb rollout.Sandbox) rollout.Sandbox {
	s := solutionSandbox{Sandbox: sb, w: w}
	if st, ok := sb.(rollout.Starter); ok {
		return solutionStarter{s, st}
	}
	return s
}

// tests wraps the tests' factory (nil stays nil).
func (w *watch) tests(f rollout.SandboxFactory) rollout.SandboxFactory {
	if f == nil {
		return nil
	}
	return rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
		sb, err := f.NewSandbox(ctx)
		if err != nil {
			return nil, mark(sideTests, err)
		}
		t := testSandbox{Sandbox: sb, w: w}
		if st, ok := sb.(rollout.Starter); ok {
			return testStarter{t, st}, nil
		}
		return t, nil
	})
}

type solutionSandbox struct {
	rollout.Sandbox
	w *watch
}

func (s solutionSandbox) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	s.w.solStarted.Store(true)
	res, err := s.Sandbox.Run(ctx, c)
	return res, mark(sideSolution, err)
}

type solutionStarter struct {
	solutionSandbox
	st rollout.Starter
}

func (s solutionStarter) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	p, err := s.st.Start(ctx, c)
	if err != nil {
		return nil, mark(sideSolution, err)
	}
	s.w.solStarted.Store(true)
	return markedProcess{Process: p, side: sideSolution}, nil
}

type testSandbox struct {
	rollout.Sandbox
	w *watch
}

func (s testSandbox) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	res, err := s.Sandbox.Run(ctx, c)
	return res, mark(sideTests, err)
}

func (s testSandbox) WriteFile(name string, data []byte) error {
	return mark(sideTests, s.Sandbox.WriteFile(name, data))
}

type testStarter struct {
	testSandbox
	st rollout.Starter
}

// unwrapTests is the Starter of a test sandbox the watch made, without the watch: for
// a command that is not the test process (whose output is not its channel).
func unwrapTests(sb rollout.Sandbox) rollout.Starter {
	if ts, ok := sb.(testStarter); ok {
		return ts.st
	}
	st, _ := sb.(rollout.Starter)
	return st
}

func (s testStarter) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	p, err := s.st.Start(ctx, c)
	if err != nil {
		return nil, mark(sideTests, err)
	}
	return markedProcess{Process: p, side: sideTests, spoke: &s.w.testSpoke}, nil
}

// markedProcess marks Wait's error; for the test process it notes the first line
// read from its channel.
type markedProcess struct {
	rollout.Process
	side  side
	spoke *atomic.Bool
}

func (p markedProcess) Stdout() io.Reader {
	if p.spoke == nil {
		return p.Process.Stdout()
	}
	return lineSpy{r: p.Process.Stdout(), spoke: p.spoke}
}

func (p markedProcess) Wait() (rollout.CommandResult, error) {
	res, err := p.Process.Wait()
	return res, mark(p.side, err)
}

type lineSpy struct {
	r     io.Reader
	spoke *atomic.Bool
}

func (l lineSpy) Read(b []byte) (int, error) {
	n, err := l.r.Read(b)
	if n > 0 && !l.spoke.Load() && bytes.IndexByte(b[:n], '\n') >= 0 {
		l.spoke.Store(true)
	}
	return n, err
}

// solutionsFault reports whether err, which ended a verification, arose in the
// rollout's sandbox and not in the infrastructure: marked as the solution side's, or
// unmarked (a harness that did not start) after the test process's harness had
// started and the solution process was started; in both cases only when no
// context ended and a control run in a fresh sandbox of tests passes.
func (w *watch) solutionsFault(ctx context.Context, err error, tests rollout.SandboxFactory, opts VerifyOptions) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrNoStarter) {
		return false
	}
	switch sideOf(err) {
	case sideTests:
		return false
	case 0:
		if !w.testSpoke.Load() || !w.solStarted.Load() {
			return false
		}
	}
	return tests == nil || control(ctx, tests, opts) == nil
}

// controlTimeout bounds the control run.
const controlTimeout = 30 * time.Second

// control runs the interpreter in a fresh sandbox of f: it passes when the factory,
// the sandbox and the interpreter work.
func control(ctx context.Context, f rollout.SandboxFactory, opts VerifyOptions) error {
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		return err
	}
	defer sb.Close()
	res, err := sb.Run(ctx, rollout.Command{Argv: []string{opts.Python, "-I", "-B", "-c", "print('ok')"}, Timeout: controlTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		return fmt.Errorf("control run: exit code %d: %s", res.ExitCode, tail(res.Stderr))
	}
	return nil
}
