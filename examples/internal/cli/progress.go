package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
)

// Progress shows groups done and sandboxes open on a terminal. Its sandbox factory
// counts the sandboxes open: one per rollout in flight, plus one for the tests of each
// rollout being verified (the verifier's own sandbox). A Progress on a
// writer that is not a terminal shows nothing; its counts still work.
type Progress struct {
	factory  rollout.SandboxFactory
	inFlight atomic.Int64
	groups   atomic.Int64
	total    int

	mu   sync.Mutex
	bar  *progressbar.ProgressBar // nil when not on a terminal
	stop chan struct{}
	done chan struct{}
}

// NewProgress returns a Progress over the factory f, drawn on w when w is a terminal
// (os.Stderr, usually). total is the number of groups expected; 0 or less means
// unknown (until interrupted). The caller calls Close.
func NewProgress(w io.Writer, f rollout.SandboxFactory, total int) *Progress {
	p := &Progress{factory: f, total: total}
	if isTerminal(w) {
		max := int64(total)
		if total <= 0 {
			max = -1
		}
		p.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("groups"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(total > 0),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.refresh()
	}
	return p
}

// refresh redraws the in-flight count twice a second until Close.
func (p *Progress) refresh() {
	defer close(p.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *Progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	p.bar.Describe(fmt.Sprintf("groups (%d sandboxes open)", p.inFlight.Load()))
	_ = p.bar.Set64(p.groups.Load())
}

// GroupDone counts a finished group.
func (p *Progress) GroupDone() {
	p.groups.Add(1)
	p.draw()
}

// InFlight is the number of sandboxes open: the rollouts in flight and the
// verifications running.
func (p *Progress) InFlight() int { return int(p.inFlight.Load()) }

// Groups is the number of groups done.
func (p *Progress) Groups() int { return int(p.groups.Load()) }

// Close stops the redraws and clears the bar. It is idempotent.
func (p *Progress) Close() {
	p.mu.Lock()
	bar, stop := p.bar, p.stop
	p.bar, p.stop = nil, nil
	p.mu.Unlock()
	if bar == nil {
		return
	}
	close(stop)
	<-p.done
	_ = bar.Finish()
}

// NewSandbox implements rollout.SandboxFactory: the wrapped factory's sandbox,
// counted as open until it is closed.
func (p *Progress) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := p.factory.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	p.inFlight.Add(1)
	return &countedSandbox{Sandbox: sb, p: p}, nil
}

// NewSandboxFor implements rollout.SpecFactory: the wrapped factory's sandbox for a
// repository task's image, counted the same way. A wrapped factory that cannot make
// one gives an error wrapping agenticopd.ErrNoSpecFactory.
func (p *Progress) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	sf, ok := p.factory.(rollout.SpecFactory)
	if !ok {
		return nil, fmt.Errorf("%w (the wrapped factory is a %T)", agenticopd.ErrNoSpecFactory, p.factory)
	}
	sb, err := sf.NewSandboxFor(ctx, spec)
	if err != nil {
		return nil, err
	}
	p.inFlight.Add(1)
	return &countedSandbox{Sandbox: sb, p: p}, nil
}

type countedSandbox struct {
	rollout.Sandbox
	p    *Progress
	once sync.Once
}

func (s *countedSandbox) Close() error {
	s.once.Do(func() { s.p.inFlight.Add(-1) })
	return s.Sandbox.Close()
}

// Dir forwards the wrapped sandbox's workspace directory (the file tools accept
// absolute paths under it); "" when it has none.
func (s *countedSandbox) Dir() string {
	if d, ok := s.Sandbox.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// Start forwards to the wrapped sandbox's Start (the verifier streams the tests'
// calls through it; see rollout.Starter).
func (s *countedSandbox) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	st, ok := s.Sandbox.(rollout.Starter)
	if !ok {
		return nil, fmt.Errorf("%w (the wrapped sandbox is a %T)", reward.ErrNoStarter, s.Sandbox)
	}
	return st.Start(ctx, cmd)
}

// Restore forwards to the wrapped sandbox's Restore (rollout.Restorer: the verifier
// gives the workspace back before grading); nothing to do when it has none.
func (s *countedSandbox) Restore(ctx context.Context) error {
	if r, ok := s.Sandbox.(rollout.Restorer); ok {
		return r.Restore(ctx)
	}
	return nil
}

// ProgressWriter is where a program whose output (logs, or lines of its own) goes to
// stdout draws its progress bar: bar (usually os.Stderr; drawn only when it is a
// terminal), unless stdout is a terminal too, where a redrawn bar would share lines
// with the output; then io.Discard, and no bar.
func ProgressWriter(stdout, bar io.Writer) io.Writer {
	if isTerminal(stdout) {
		return io.Discard
	}
	return bar
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
