package sandbox

import (
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/agentic-opd/agenticopd/rollout"
)

var _ rollout.Starter = (*Sandbox)(nil)

// stream is what a started command adds to a runSpec: its kill switch and output
// counter, shared with the caller's Stdout reader, and the child's ends of the stdin
// and stdout pipes, which execute passes to the command and then closes.
type stream struct {
	proc                    *proc
	all                     *atomic.Int64
	childStdin, childStdout *os.File
}

// Start starts c in the sandbox and returns at once: it implements [rollout.Starter]
// for the bubblewrap and the unconfined sandbox. The command is built, limited and
// killed exactly as by [Sandbox.RunDetailed] (the same flags, cgroup, rlimits, timeout,
// process-group and pid-namespace kill, disk quota and output caps), with its standard
// input and output connected to the returned [rollout.Process]; the bytes read from
// its Stdout count towards Config.KillOutputLimit together with its standard error.
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
	st := &stream{proc: &proc{}, all: new(atomic.Int64), childStdin: inR, childStdout: outW}
	spec.stream = st
	sp := &startedProcess{
		stdin:  inW,
		stdout: &countingReader{f: outR, all: st.all, hard: s.f.cfg.KillOutputLimit, over: func() { st.proc.kill(reasonOutput) }},
		out:    outR,
		proc:   st.proc,
		done:   make(chan struct{}),
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
	stdin  *os.File
	stdout *countingReader
	out    *os.File
	proc   *proc
	done   chan struct{}
	res    Result
	err    error
	once   sync.Once
}

func (p *startedProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *startedProcess) Stdout() io.Reader     { return p.stdout }
func (p *startedProcess) Kill()                 { p.proc.kill(reasonKilled) }

// Wait implements [rollout.Process].
func (p *startedProcess) Wait() (rollout.CommandResult, error) {
	<-p.done
	p.once.Do(func() { closeAll(p.stdin, p.out) })
	return p.res.CommandResult, p.err
}

// countingReader counts what is read from a started command's stdout against the
// hard output cap and kills the command past it.
type countingReader struct {
	f    *os.File
	all  *atomic.Int64
	hard int64
	over func()
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if n > 0 && r.all.Add(int64(n)) > r.hard {
		r.over()
	}
	return n, err
}
