package bwrap

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/agentic-opd/agenticopd/rollout"
)

var _ rollout.Starter = (*Sandbox)(nil)

// stream is what a started command adds to a runSpec: its kill switch and the
// child's ends of the stdin and stdout pipes, which execute passes to the command and
// then closes.
type stream struct {
	proc                    *proc
	childStdin, childStdout *os.File
}

// Start starts c in the sandbox and returns at once: it implements [rollout.Starter]
// for the bubblewrap and the unconfined sandbox. The command is built, limited and
// killed exactly as by [Sandbox.RunDetailed] (the same flags, cgroup, rlimits, timeout,
// process-group and pid-namespace kill, disk quota and output caps), with its standard
// input and output connected to the returned [rollout.Process]. Its standard error is
// collected and capped as Run's; its standard output is the caller's: the caller bounds
// what it reads, and a command that writes faster than it is read blocks on the pipe,
// so the bytes read from Stdout do not count towards Config.KillOutputLimit (a
// conversation over the pipes may move any amount in all, as a verification's does).
// Errors of a command that could not be set up (a bad command [ErrInvalidCommand], a
// closed sandbox [ErrClosed]) come back here; bubblewrap failing later ([ErrStart]),
// ctx ending and the like come back from Wait, as from RunDetailed.
func (s *Sandbox) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	if c.Stdin != nil {
		return nil, commandError("Start streams standard input: leave Command.Stdin nil and write to Process.Stdin")
	}
	spec, timeout, err := s.prepare(ctx, c)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		spec.discard()
		s.active.Done()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		spec.discard()
		s.active.Done()
		closeAll(inR, inW)
		return nil, err
	}
	st := &stream{proc: &proc{}, childStdin: inR, childStdout: outW}
	spec.stream = st
	sp := &startedProcess{
		stdin: inW,
		out:   outR,
		proc:  st.proc,
		done:  make(chan struct{}),
	}
	go func() {
		defer s.active.Done()
		sp.res, sp.err = s.execute(ctx, spec, timeout)
		close(sp.done)
	}()
	return sp, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// startedProcess implements rollout.Process.
type startedProcess struct {
	stdin *os.File
	out   *os.File
	proc  *proc
	done  chan struct{}
	res   Result
	err   error
	once  sync.Once
}

func (p *startedProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *startedProcess) Stdout() io.Reader     { return p.out }
func (p *startedProcess) Kill()                 { p.proc.kill(reasonKilled) }

// Wait implements [rollout.Process].
func (p *startedProcess) Wait() (rollout.CommandResult, error) {
	<-p.done
	p.once.Do(func() { closeAll(p.stdin, p.out) })
	return p.res.CommandResult, p.err
}
