package vllm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

// Defaults of the pool's health checks; see [WithHealthCheck].
const (
	DefaultHealthInterval = 2 * time.Second
	DefaultHealthTimeout  = 2 * time.Second
)

// ErrNoHealthyServer is returned by [Pool] calls when every server has failed and none
// answers GET /health.
var ErrNoHealthyServer = errors.New("vllm: no healthy server in the pool")

// WithHealthCheck sets how often a [Pool] probes its failed servers with GET /health,
// and how long one probe may take. NewClient ignores it. Defaults
// [DefaultHealthInterval], [DefaultHealthTimeout].
func WithHealthCheck(interval, timeout time.Duration) Option {
	return func(cf *config) { cf.healthInterval, cf.healthTimeout = interval, timeout }
}

// Pool spreads requests over several vLLM servers serving the same model. Each call
// goes to the healthy server with the fewest requests in flight. A server whose call
// fails with a connection error (a broken answer, or an attempt that ran past its
// timeout, included) or a 5xx is marked failed and skipped; the call moves on to one
// other server, and no further ([MaxServersPerCall]): a request that kills engines is
// not replayed on every server. The end of the caller's ctx marks no server. A background checker, owned by the pool, probes failed
// servers with GET /health and takes them back when they answer; when every server is
// marked failed, a call probes them itself before giving up with [ErrNoHealthyServer].
//
// A Pool is safe for concurrent use and implements the same roles as [Client]. Close
// stops the checker; the caller that made the pool closes it.
type Pool struct {
	members  []*member
	score    scoreLimits
	logger   *slog.Logger
	interval time.Duration
	timeout  time.Duration

	mu   sync.Mutex
	next int // rotates ties between equally loaded servers

	ctx       context.Context // ends at Close; bounds the checker's probes
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

type member struct {
	c        *Client
	inflight int  // guarded by Pool.mu
	failed   bool // guarded by Pool.mu
}

// NewPool returns a pool over the servers at urls, all considered healthy until a call
// fails. Options apply to every server's [Client]. It does no I/O; it starts the health
// checker, which [Pool.Close] stops.
func NewPool(urls []string, opts ...Option) (*Pool, error) {
	if len(urls) == 0 {
		return nil, errors.New("vllm: NewPool: no server URLs")
	}
	cf := defaultConfig()
	for _, o := range opts {
		o(&cf)
	}
	if cf.healthInterval <= 0 || cf.healthTimeout <= 0 {
		return nil, fmt.Errorf("vllm: NewPool: health interval %v and timeout %v must be > 0", cf.healthInterval, cf.healthTimeout)
	}
	p := &Pool{
		score: cf.score, logger: cf.logger,
		interval: cf.healthInterval, timeout: cf.healthTimeout,
		done: make(chan struct{}),
	}
	seen := map[string]bool{}
	for _, u := range urls {
		c, err := newClient(u, cf)
		if err != nil {
			return nil, err
		}
		if seen[c.BaseURL()] {
			return nil, fmt.Errorf("vllm: NewPool: %s listed twice", c.BaseURL())
		}
		seen[c.BaseURL()] = true
		p.members = append(p.members, &member{c: c})
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.check()
	return p, nil
}

// Close stops the health checker, waits for it, and closes the idle connections of
// the clients' own transports (not those of a [WithHTTPClient] client), so that no
// goroutine of the pool outlives it. It is idempotent; calls made after Close still
// work, without background checks.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		<-p.done
		for _, m := range p.members {
			if m.c.ownHTTP != nil {
				m.c.ownHTTP.CloseIdleConnections()
			}
		}
	})
	return nil
}

// Clients returns the pool's clients, one per server, in the order of the URLs.
func (p *Pool) Clients() []*Client {
	out := make([]*Client, len(p.members))
	for i, m := range p.members {
		out[i] = m.c
	}
	return out
}

// Healthy returns the base URLs of the servers not marked failed.
func (p *Pool) Healthy() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.members {
		if !m.failed {
			out = append(out, m.c.BaseURL())
		}
	}
	return out
}

// check probes failed servers every interval until Close.
func (p *Pool) check() {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.probe(p.ctx, nil)
		}
	}
}

// probe asks every failed server not in skip for /health and takes back those that
// answer. It returns the first server taken back, or nil.
func (p *Pool) probe(ctx context.Context, skip map[*member]bool) *member {
	p.mu.Lock()
	var failed []*member
	for _, m := range p.members {
		if m.failed && !skip[m] {
			failed = append(failed, m)
		}
	}
	p.mu.Unlock()
	var first *member
	for _, m := range failed {
		hctx, cancel := context.WithTimeout(ctx, p.timeout)
		err := m.c.Health(hctx)
		cancel()
		if err != nil {
			continue
		}
		p.mu.Lock()
		m.failed = false
		p.mu.Unlock()
		if p.logger != nil {
			p.logger.Info("vllm: server healthy again", "url", m.c.BaseURL())
		}
		if first == nil {
			first = m
		}
	}
	return first
}

// acquire picks the healthy server with the fewest calls in flight, not in skip.
func (p *Pool) acquire(skip map[*member]bool) *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *member
	n := len(p.members)
	for i := range n {
		m := p.members[(p.next+i)%n]
		if m.failed || skip[m] {
			continue
		}
		if best == nil || m.inflight < best.inflight {
			best = m
		}
	}
	if best != nil {
		best.inflight++
		p.next = (p.next + 1) % n
	}
	return best
}

func (p *Pool) release(ctx context.Context, m *member, err error) {
	fail := serverFailure(ctx, err)
	p.mu.Lock()
	m.inflight--
	if fail {
		m.failed = true
	}
	p.mu.Unlock()
	if fail && p.logger != nil {
		p.logger.Warn("vllm: server marked failed", "url", m.c.BaseURL(), "error", err)
	}
}

// serverFailure reports whether err says the server is down or broken: a connection
// error (including an attempt that timed out under [WithAttemptTimeout]) or a 5xx, as
// opposed to a bad request or the end of the caller's ctx. Whether the caller's ctx
// ended is asked of ctx itself: an attempt timeout also satisfies
// errors.Is(err, context.DeadlineExceeded).
func serverFailure(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var te *transportError
	if errors.As(err, &te) {
		return true
	}
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= http.StatusInternalServerError
}

// MaxServersPerCall is how many servers of a [Pool] one call may reach: the first it
// is sent to and, when that one fails as a server (a 5xx, a dropped or broken
// connection, an attempt past its timeout), one other. A request that crashes an
// engine (a scoring batch too large for its memory, say) thus takes down at most two
// servers, never the whole pool.
const MaxServersPerCall = 2

// do runs fn on one server and, when it fails as a server, once more on another.
func (p *Pool) do(ctx context.Context, fn func(*Client) error) error {
	tried := map[*member]bool{}
	var last error
	for {
		if err := ctx.Err(); err != nil {
			if last != nil {
				return errors.Join(err, last)
			}
			return err
		}
		m := p.acquire(tried)
		if m == nil {
			if p.probe(ctx, tried) == nil {
				if last != nil {
					return fmt.Errorf("%w: last error: %w", ErrNoHealthyServer, last)
				}
				return ErrNoHealthyServer
			}
			continue
		}
		err := fn(m.c)
		p.release(ctx, m, err)
		if !serverFailure(ctx, err) {
			return err
		}
		tried[m] = true
		last = err
		if len(tried) == MaxServersPerCall {
			if len(p.Healthy()) == 0 {
				return fmt.Errorf("%w: last error: %w", ErrNoHealthyServer, last)
			}
			return fmt.Errorf("vllm: the call failed on %d servers and is not sent to more: %w", len(tried), last)
		}
	}
}

// Render implements [rollout.Policy] on one server of the pool.
func (p *Pool) Render(ctx context.Context, req rollout.RenderRequest) (out rollout.Rendered, err error) {
	err = p.do(ctx, func(c *Client) (err error) { out, err = c.Render(ctx, req); return err })
	return out, err
}

// Generate implements [rollout.Policy] on one server of the pool.
func (p *Pool) Generate(ctx context.Context, req rollout.GenerateRequest) (out rollout.Generation, err error) {
	err = p.do(ctx, func(c *Client) (err error) { out, err = c.Generate(ctx, req); return err })
	return out, err
}

// Chat implements [judge.ChatModel] on one server of the pool.
func (p *Pool) Chat(ctx context.Context, req judge.ChatRequest) (out judge.ChatResponse, err error) {
	err = p.do(ctx, func(c *Client) (err error) { out, err = c.Chat(ctx, req); return err })
	return out, err
}

// Score implements [scorer.LogprobScorer]. The request is split as by [Client.Score],
// and each part goes to its own server, so a large request spreads over the pool.
func (p *Pool) Score(ctx context.Context, req scorer.Request) (scorer.Result, error) {
	return scoreSplit(ctx, req, p.score, func(ctx context.Context, seqs []scorer.Sequence, k int) (out []scorer.SequenceResult, err error) {
		err = p.do(ctx, func(c *Client) (err error) { out, err = c.scoreBatch(ctx, seqs, k); return err })
		return out, err
	})
}
