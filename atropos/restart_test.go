package atropos_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// startTrainer registers a trainer (resuming at step) and makes its first /batch.
func startTrainer(t *testing.T, srv *atropostest.Server, step int) *atropos.Trainer {
	t.Helper()
	tr := newTrainer(t, srv.URL())
	reg := trainerReg
	reg.StartingStep = step
	_, err := tr.Register(context.Background(), reg)
	require.NoError(t, err)
	_, err = tr.Batch(context.Background())
	require.NoError(t, err)
	return tr
}

// firstIndex returns the index of the first request to path answered with 200, or -1.
func firstIndex(reqs []atropostest.Request, path string) int {
	for i, r := range reqs {
		if r.Path == path && r.Status == http.StatusOK {
			return i
		}
	}
	return -1
}

// envIDs returns the env_id of each group.
func envIDs(groups []*atropos.ScoredDataGroup) []int {
	out := make([]int, len(groups))
	for i, g := range groups {
		out[i] = -1
		if g.EnvID != nil {
			out[i] = *g.EnvID
		}
	}
	return out
}

// TestSendAfterRestartWaitsForTheTrainer: the API is killed with a Send in flight and
// comes back empty; the group is posted only after the trainer registered again and
// the env registered again, so the API is not wedged and the group is not lost.
func TestSendAfterRestartWaitsForTheTrainer(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	c := registered(t, srv, t.TempDir())
	srv.Kill()

	sent := make(chan error, 1)
	go func() { sent <- c.Send(context.Background(), group(1, 2)) }()
	require.NoError(t, srv.Restart())
	// The env must keep asking /info and not post while no trainer is registered.
	testctx.Eventually(t, func() bool { return srv.RequestCount("/info") >= 3 }, time.Millisecond)
	require.Empty(t, srv.Received(), "nothing posted into an API without a trainer")
	srv.ResetRequests()
	tr := startTrainer(t, srv, 0)
	require.NoError(t, <-sent)

	reqs := srv.Requests()
	require.Less(t, firstIndex(reqs, "/register-env"), firstIndex(reqs, "/scored_data"), "registered again before posting")
	info, err := tr.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, trainerReg.BatchSize, info.BatchSize, "the API is not wedged")
	require.Equal(t, []int{0}, envIDs(srv.Queue()))
	require.Equal(t, 1, c.Resets())
}

// TestStepBackShowsAnotherEnvTookTheID: the API restarts between two polls, the trainer
// registers again at once (at step 0) and another env takes env id 0, this env's old
// id. The env must notice (the step went back), register again under a new id, send
// under it, and not disconnect the other env.
func TestStepBackShowsAnotherEnvTookTheID(t *testing.T) {
	srv := atropostest.NewServer(t)
	tr := startTrainer(t, srv, 0)
	c := registered(t, srv, t.TempDir())
	ctx := context.Background()
	for i := range 4 { // one batch of 8 sequences
		require.NoError(t, c.Send(ctx, group(float64(i+1), 2)))
	}
	b, err := tr.Batch(ctx)
	require.NoError(t, err)
	require.Len(t, b, 4)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.CurrentStep)

	require.NoError(t, srv.Restart())
	startTrainer(t, srv, 0)
	other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
	require.Equal(t, 0, other.Registration().EnvID)

	_, err = c.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, c.Registration().EnvID, "registered again under a new id")
	require.Equal(t, 1, c.Resets())
	require.NoError(t, c.Send(ctx, group(9, 2)))
	require.Equal(t, []int{1}, envIDs(srv.Queue()))
	require.NoError(t, c.Disconnect(ctx))
	envs := srv.Envs()
	require.True(t, envs[0].Connected, "the other env stays connected")
	require.False(t, envs[1].Connected)
}

// TestResetResendsAcceptedGroupsNotServed: groups the API accepted but the trainer had
// not pulled are lost by a /reset_data; the client sends them again after registering
// again. Groups the trainer was served are not sent again.
func TestResetResendsAcceptedGroupsNotServed(t *testing.T) {
	srv := atropostest.NewServer(t)
	tr := startTrainer(t, srv, 0)
	c := registered(t, srv, t.TempDir())
	ctx := context.Background()
	for i := range 4 {
		require.NoError(t, c.Send(ctx, group(float64(i+1), 2)))
	}
	require.Equal(t, 4, c.Unserved())
	_, err := c.Status(ctx) // the four are out of the queue only once a batch forms
	require.NoError(t, err)
	b, err := tr.Batch(ctx)
	require.NoError(t, err)
	require.Len(t, b, 4)
	_, err = c.Status(ctx) // out of the queue at step 1
	require.NoError(t, err)
	require.Equal(t, 4, c.Unserved(), "out of the queue, but the batch may not be served yet")

	for i := range 3 {
		require.NoError(t, c.Send(ctx, group(float64(10+i), 2)))
	}
	// One more batch: 3 groups queued are not enough, add one and pull.
	require.NoError(t, c.Send(ctx, group(20, 2)))
	_, err = tr.Batch(ctx)
	require.NoError(t, err)
	_, err = c.Status(ctx) // step 2 > 1: the first four were served; the next four are out
	require.NoError(t, err)
	require.Equal(t, 4, c.Unserved())
	require.NoError(t, c.Send(ctx, group(30, 2)))
	require.Equal(t, 5, c.Unserved())

	srv.Reset() // the trainer resets the API: the queue (group 30) and formed batches go
	startTrainer(t, srv, 2)
	_, err = c.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, c.Resets())
	require.Equal(t, 5, c.Resent(), "the four not known served and group 30")
	require.NoError(t, c.Flush(ctx))
	require.Equal(t, []float64{10, 11, 12, 20, 30}, scoresOf(srv.Queue()))
}

// TestDisconnectOnlyUnderACurrentRegistration: after a restart the env's id may be
// another env's; Disconnect sends nothing then.
func TestDisconnectOnlyUnderACurrentRegistration(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	c := registered(t, srv, t.TempDir())
	srv.Kill()
	_, err := c.Status(ctxTimeout(t, 50*time.Millisecond))
	require.Error(t, err, "the API is down")
	require.NoError(t, srv.Restart())
	startTrainer(t, srv, 0)
	other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
	require.Equal(t, 0, other.Registration().EnvID)
	srv.ResetRequests()

	require.ErrorIs(t, c.Disconnect(context.Background()), atropos.ErrRegistrationLost)
	require.Zero(t, srv.RequestCount("/disconnect-env"))
	require.True(t, srv.Envs()[0].Connected)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestStatusEnvGoneIsAReset: after a reset with fewer envs registered than this env's
// id, /status-env answers 500 for it while /info shows a trainer; after a few rounds
// the client registers again.
func TestStatusEnvGoneIsAReset(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "first" })
	c := registered(t, srv, t.TempDir())
	require.Equal(t, 1, c.Registration().EnvID)
	srv.Reset()
	startTrainer(t, srv, 5) // a resumed trainer: the step does not go back
	_, err := c.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, c.Resets())
	require.Equal(t, 0, c.Registration().EnvID)
}

// TestRetryAfterIsHonoured: 429 and 408 are retried, waiting at least Retry-After; a
// 400 still goes to the dead-letter file.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	target, err := url.Parse(srv.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var posts atomic.Int64
	var mu sync.Mutex
	var times []time.Time
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/scored_data" {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			switch posts.Add(1) {
			case 1:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			case 2:
				http.Error(w, "request timeout", http.StatusRequestTimeout)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	c, err := atropos.NewClient(front.URL, atropos.ClientConfig{
		EnvName: "env", GroupSize: 2, SpoolDir: t.TempDir(), HTTPClient: httpClient(t), PollInterval: time.Millisecond,
		Retry: atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
	})
	require.NoError(t, err)
	require.NoError(t, c.Register(context.Background()))
	require.NoError(t, c.Send(context.Background(), group(1, 2)))
	require.Equal(t, int64(3), posts.Load())
	require.GreaterOrEqual(t, times[1].Sub(times[0]), time.Second, "waited the Retry-After")
	require.Equal(t, []float64{1}, scoresOf(srv.Received()))
	require.Zero(t, c.Resets(), "a 429 or 408 is no sign of a restart")
}
