package agenticopd_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/vllm"
)

func key(g *atropos.ScoredDataGroup) string { return fmt.Sprint(g.Tokens, g.Scores) }

const (
	groupSize = 2
	batchSize = 4 // two groups per batch
	offPolicy = 1 // pause once one batch is queued
	maxGroups = 2
)

// serving is an env serving the fake trajectory API, and what it sent.
type serving struct {
	api    *atropostest.Server
	client *atropos.Client
	env    *agenticopd.Env

	logs *logCounter // the env's log

	mu   sync.Mutex
	sent map[string]int // groups the env finished and did not drop
}

// logCounter is a slog.Handler that counts the records it gets, by message.
type logCounter struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[r.Message]++
	return nil
}

func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[msg]
}

func newServing(t *testing.T, retry atropos.RetryConfig, mods ...func(*agenticopd.Config)) *serving {
	t.Helper()
	s := &serving{api: atropostest.NewServer(t), sent: map[string]int{}, logs: &logCounter{msgs: map[string]int{}}}
	f := newFixture(t, func(c *agenticopd.Config) {
		c.Logger = slog.New(s.logs)
		c.MaxGroups = maxGroups
		c.PollInterval = 10 * time.Millisecond
		c.OnGroup = func(g *agenticopd.Group) {
			if g.Dropped == "" {
				s.mu.Lock()
				s.sent[key(g.Data)]++
				s.mu.Unlock()
			}
		}
		for _, mod := range mods {
			mod(c)
		}
	})
	s.env = f.env
	var err error
	s.client, err = atropos.NewClient(s.api.URL(), atropos.ClientConfig{
		EnvName: "agentic_opd", GroupSize: groupSize, SpoolDir: t.TempDir(),
		MaxBatchesOffPolicy: offPolicy, PollInterval: 10 * time.Millisecond,
		StatusInterval: 10 * time.Millisecond, Retry: retry,
	})
	require.NoError(t, err)
	return s
}

// received counts the groups the API got, by content.
func (s *serving) received() map[string]int {
	out := map[string]int{}
	for _, g := range s.api.Received() {
		out[key(g)]++
	}
	return out
}

// train registers a trainer for numSteps and returns it after its first /batch, which
// lets envs register.
func train(ctx context.Context, t *testing.T, api *atropostest.Server, numSteps int) *atropos.Trainer {
	t.Helper()
	tr, err := atropos.NewTrainer(api.URL())
	require.NoError(t, err)
	_, err = tr.Register(ctx, atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 1 << 20, NumSteps: numSteps})
	require.NoError(t, err)
	_, err = tr.Batch(ctx)
	require.NoError(t, err)
	return tr
}

// serveWhilePulling runs Serve while trainer pulls a batch every 20 ms, and returns
// Serve's result.
func serveWhilePulling(ctx context.Context, t *testing.T, s *serving, trainer *atropos.Trainer) error {
	t.Helper()
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.env.Serve(ctx, s.client) }()
	for {
		select {
		case err := <-serveErr:
			return err
		case <-time.After(20 * time.Millisecond):
			_, err := trainer.Batch(ctx)
			require.NoError(t, err)
		}
	}
}

func TestServeDeliversEveryGroupOnceUnderBackPressure(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	const queueLimit = offPolicy*batchSize/groupSize + maxGroups
	s := newServing(t, atropos.RetryConfig{})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	trainer := train(ctx, t, s.api, 3)

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.env.Serve(ctx, s.client) }()

	// The trainer pulls only when a full batch waits, so the env has to pause first;
	// the queue must stay bounded meanwhile, and fill again after each pull.
	var served []*atropos.ScoredDataGroup
	maxQueued, pulls := 0, 0
	for done := false; !done; {
		select {
		case err := <-serveErr:
			require.NoError(t, err, "Serve ends by the API's stop rule")
			done = true
		case <-time.After(20 * time.Millisecond):
		}
		queued := len(s.api.Received()) - len(served)
		maxQueued = max(maxQueued, queued)
		if queued*groupSize >= batchSize {
			b, err := trainer.Batch(ctx)
			require.NoError(t, err)
			if b != nil {
				pulls++
				served = append(served, b...)
			}
		}
	}

	assert.LessOrEqual(t, maxQueued, queueLimit, "the env paused while the trainer did not pull")
	assert.GreaterOrEqual(t, pulls, 2, "the env resumed after the trainer pulled")
	s.mu.Lock()
	defer s.mu.Unlock()
	received := s.received()
	assert.Equal(t, s.sent, received, "every group sent arrives exactly once")
	for _, g := range served {
		assert.Contains(t, received, key(g))
	}
	assert.Equal(t, 1, s.api.RequestCount("/disconnect-env"))
}

func TestServeFlushesTheSpoolWhenSendsGiveUp(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	// Two attempts per Send: the first two posts fail, so the first group's Send gives
	// up and leaves it in the spool; Serve must deliver it without a restart.
	// One group at a time: two Sends running at once could each take one of the
	// failures and succeed on their second attempt.
	s := newServing(t, atropos.RetryConfig{MaxAttempts: 2, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		func(c *agenticopd.Config) { c.MaxGroups = 1 })
	s.api.FailNext("/scored_data", 2, 503, "")
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	trainer := train(ctx, t, s.api, 2)

	require.NoError(t, serveWhilePulling(ctx, t, s, trainer))
	require.GreaterOrEqual(t, s.env.Metrics()["env/send_failures"], float64(1), "a Send gave up")
	s.mu.Lock()
	defer s.mu.Unlock()
	// Once, unless the client took itself for paused (a status round trip slower than
	// PauseLimit on a loaded machine) or saw a reset: then a group the API had may be
	// sent again, and reach it twice, never more.
	again := s.client.Resets() + s.client.Retired()
	received := s.received()
	for k, n := range s.sent {
		got := received[k]
		if again == 0 {
			assert.Equal(t, n, got, "the spooled group was delivered, once")
		} else {
			assert.True(t, got >= n && got <= 2*n, "delivered %d times for %d collected (resets %d, retired after a pause %d)",
				got, n, s.client.Resets(), s.client.Retired())
		}
	}
	for k := range received {
		assert.Contains(t, s.sent, k, "a group the API got was collected")
	}
	n, err := s.client.Spooled()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left in the spool")
}

func TestServeStopsOnCancel(t *testing.T) {
	s := newServing(t, atropos.RetryConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	train(ctx, t, s.api, 1000)
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.env.Serve(ctx, s.client) }()
	testctx.Eventually(t, func() bool { return len(s.api.Received()) > 0 }, 10*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-serveErr, context.Canceled)
	assert.Equal(t, 1, s.api.RequestCount("/disconnect-env"), "a clean stop disconnects")
}

func TestServeGivesUpWhenTheAPIStopsAnswering(t *testing.T) {
	s := newServing(t, atropos.RetryConfig{}, func(c *agenticopd.Config) { c.StatusTimeout = 300 * time.Millisecond })
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	train(ctx, t, s.api, 1000)
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.env.Serve(ctx, s.client) }()
	testctx.Eventually(t, func() bool { return len(s.api.Received()) > 0 }, 10*time.Millisecond)
	s.api.SetDown(true) // the API process is gone: every request fails
	err := <-serveErr
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Serve gave up by itself, before the test's deadline")
	assert.Contains(t, err.Error(), "failed every status poll")
}

func TestServeGivesUpAfterOneHungPollOfStatusTimeout(t *testing.T) {
	// A status poll that hangs until its StatusTimeout deadline is a whole
	// StatusTimeout of failure: Serve gives up after it, without a second poll.
	s := newServing(t, atropos.RetryConfig{}, func(c *agenticopd.Config) { c.StatusTimeout = 200 * time.Millisecond })
	s.api.AddFault(atropostest.Fault{Path: "/status-env", Delay: time.Hour})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	train(ctx, t, s.api, 1000)
	err := s.env.Serve(ctx, s.client)
	require.Error(t, err)
	require.NoError(t, ctx.Err())
	assert.Contains(t, err.Error(), "failed every status poll")
	// The second request, if any, is Disconnect's check that the id is still this env's;
	// it hangs too, so nothing is disconnected.
	assert.LessOrEqual(t, s.api.RequestCount("/status-env"), 2, "one hung poll is enough")
	assert.Zero(t, s.api.RequestCount("/disconnect-env"))
	assert.Empty(t, s.api.Received())
}

func TestServeStopsOnAGroupTheAPICannotTake(t *testing.T) {
	// The env collects groups of 2, the client was told 4: every Send fails
	// validation, so Serve must stop with that error instead of collecting forever.
	s := newServing(t, atropos.RetryConfig{})
	client, err := atropos.NewClient(s.api.URL(), atropos.ClientConfig{
		EnvName: "agentic_opd", GroupSize: 2 * groupSize, SpoolDir: t.TempDir(),
		PollInterval: 10 * time.Millisecond, StatusInterval: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	train(ctx, t, s.api, 1000)
	err = s.env.Serve(ctx, client)
	require.ErrorIs(t, err, atropos.ErrInvalidGroup)
	assert.Contains(t, err.Error(), "GroupSize")
	assert.Empty(t, s.api.Received())
	assert.Equal(t, 1, s.api.RequestCount("/disconnect-env"))
}

func TestServeTakesMaxTokenLenFromTheTrainer(t *testing.T) {
	// The trainer's max_token_len is shorter than any sequence: Serve drops every
	// group before the judge, and sends none.
	dropped := make(chan string, 100)
	s := newServing(t, atropos.RetryConfig{}, func(c *agenticopd.Config) {
		c.KeepEqualScores = true // concurrent groups can get equal scores from the scripted coder
		c.OnGroup = func(g *agenticopd.Group) { dropped <- g.Dropped }
	})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	tr, err := atropos.NewTrainer(s.api.URL())
	require.NoError(t, err)
	_, err = tr.Register(ctx, atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 100, NumSteps: 1000})
	require.NoError(t, err)
	_, err = tr.Batch(ctx)
	require.NoError(t, err)

	sctx, stop := context.WithCancel(ctx)
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.env.Serve(sctx, s.client) }()
	assert.Equal(t, agenticopd.DropTooLong, <-dropped)
	stop()
	require.ErrorIs(t, <-serveErr, context.Canceled)
	assert.Empty(t, s.api.Received())
	assert.Equal(t, float64(0), s.env.Metrics()["env/groups_sent"])
}

func TestServeStopsWhenTheTeacherRefusesTopK(t *testing.T) {
	// The simulator allows 20 logprobs (vLLM's default --max-logprobs); asking for 30
	// fails every group with a hint, so Serve stops with that error.
	s := newServing(t, atropos.RetryConfig{}, func(c *agenticopd.Config) { c.DistillTopK = 30 })
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	train(ctx, t, s.api, 1000)
	err := s.env.Serve(ctx, s.client)
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	assert.Contains(t, err.Error(), "DistillTopK")
	assert.Equal(t, 1, s.api.RequestCount("/disconnect-env"))
}

func TestServeCallsOnGroupOneAtATime(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	var inside, overlaps, calls atomic.Int64
	s := newServing(t, atropos.RetryConfig{}, func(c *agenticopd.Config) {
		c.OnGroup = func(*agenticopd.Group) {
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			time.Sleep(50 * time.Millisecond) // widen the window two groups could share
			inside.Add(-1)
			calls.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	trainer := train(ctx, t, s.api, 2)
	require.NoError(t, serveWhilePulling(ctx, t, s, trainer))
	assert.GreaterOrEqual(t, calls.Load(), int64(maxGroups))
	assert.Zero(t, overlaps.Load(), "OnGroup calls overlapped")
}

// TestServeBeforeTheFirstRegistration: with an API that answers nothing, Serve gives
// up after StatusTimeout, with an error naming the API's URL, even before it ever
// registered; with an API that answers but has no trainer, it waits however long the
// trainer takes; a cancelled ctx is a clean stop that returns context.Canceled.
func TestServeBeforeTheFirstRegistration(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	deadURL := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		url := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close()) // connections are refused from now on
		return url
	}
	tests := []struct {
		name string
		// dead: the client points at a port where nothing listens.
		dead bool
		// run starts Serve and returns its error; it may act while Serve runs.
		run func(t *testing.T, ctx context.Context, s *serving) error
		// check examines the error.
		check func(t *testing.T, err error, url string)
	}{
		{"no API at all", true, func(t *testing.T, ctx context.Context, s *serving) error {
			return s.env.Serve(ctx, s.client)
		}, func(t *testing.T, err error, url string) {
			require.Error(t, err)
			assert.Contains(t, err.Error(), url, "the error names the URL")
			assert.Contains(t, err.Error(), "answered nothing")
			assert.NotErrorIs(t, err, context.Canceled)
		}},
		{"no trainer for several StatusTimeouts", false, func(t *testing.T, ctx context.Context, s *serving) error {
			serveErr := make(chan error, 1)
			go func() { serveErr <- s.env.Serve(ctx, s.client) }()
			// Serve logs each StatusTimeout it waited: two of them.
			testctx.Eventually(t, func() bool { return s.logs.count("waiting for a trainer to register with the trajectory API") >= 2 },
				5*time.Millisecond)
			select {
			case err := <-serveErr:
				t.Fatalf("Serve gave up while the API waited for a trainer: %v", err)
			default:
			}
			trainer := train(ctx, t, s.api, 2)
			for {
				select {
				case err := <-serveErr:
					return err
				case <-time.After(20 * time.Millisecond):
					_, err := trainer.Batch(ctx)
					require.NoError(t, err)
				}
			}
		}, func(t *testing.T, err error, _ string) {
			require.NoError(t, err, "the stop rule ends Serve once the trainer came")
		}},
		{"cancelled while waiting for a trainer", false, func(t *testing.T, ctx context.Context, s *serving) error {
			ctx, cancel := context.WithCancel(ctx)
			serveErr := make(chan error, 1)
			go func() { serveErr <- s.env.Serve(ctx, s.client) }()
			testctx.Eventually(t, func() bool { return s.api.RequestCount("/info") >= 2 }, 5*time.Millisecond)
			cancel()
			return <-serveErr
		}, func(t *testing.T, err error, _ string) {
			require.ErrorIs(t, err, context.Canceled)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A short StatusTimeout where nothing answers; a longer one where the API
			// answers, so that a status poll slowed by a loaded machine is not taken for
			// an API that answers nothing.
			timeout := 10 * time.Second
			if tt.dead {
				timeout = 2 * time.Second
			}
			s := newServing(t, atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
				func(c *agenticopd.Config) { c.StatusTimeout = timeout })
			url := s.api.URL()
			if tt.dead {
				url = deadURL(t)
				var err error
				s.client, err = atropos.NewClient(url, atropos.ClientConfig{EnvName: "agentic_opd", GroupSize: groupSize, SpoolDir: t.TempDir()})
				require.NoError(t, err)
			}
			ctx, cancel := context.WithCancel(testctx.Context(t))
			defer cancel()
			err := tt.run(t, ctx, s)
			require.NoError(t, ctx.Err(), "Serve ended by itself, before the guard's deadline")
			tt.check(t, err, url)
		})
	}
}
