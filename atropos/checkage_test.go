package atropos_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// manualClock is a clock a test moves by hand: it reads the real clock at its start
// plus what the test added.
type manualClock struct {
	base time.Time
	off  atomic.Int64
}

func newManualClock() *manualClock { return &manualClock{base: time.Now()} }

func (m *manualClock) now() time.Time { return m.base.Add(time.Duration(m.off.Load())) }

func (m *manualClock) advance(d time.Duration) { m.off.Add(int64(d)) }

// TestHeldStatusAnswerIsCheckedAgain: the /status-env check before a post is answered
// by the API, and its answer is held (a slow network, an env process stopped between
// check and post) while the API restarts. The post must not go out on that old answer:
// the check is older than MaxCheckAge by the client's clock, so it is made again, and
// the second check reaches the restarted API and shows the restart.
func TestHeldStatusAnswerIsCheckedAgain(t *testing.T) {
	tests := []struct {
		name string
		// restarted sets up the restarted API while the old answer is held, and
		// returns what must still work once the env has posted.
		restarted func(t *testing.T, srv *atropostest.Server) (after func(t *testing.T))
	}{
		{"trainer back first, another env took the id", func(t *testing.T, srv *atropostest.Server) func(*testing.T) {
			startTrainer(t, srv, 0)
			other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
			require.Equal(t, 0, other.Registration().EnvID, "the other env has this env's old id")
			return func(t *testing.T) {}
		}},
		{"another env waiting, no trainer yet", func(t *testing.T, srv *atropostest.Server) func(*testing.T) {
			other := newEnv(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
			registering := make(chan error, 1)
			go func() { registering <- other.Register(context.Background()) }()
			testctx.Eventually(t, func() bool { return srv.RequestCount("/info") >= 2 }, time.Millisecond,
				"the other env waits for a trainer")
			return func(t *testing.T) {
				// A post before the trainer registered would have wedged the API: the
				// trainer's registration would do nothing and nobody could register.
				tr := startTrainer(t, srv, 0)
				info, err := tr.Info(context.Background())
				require.NoError(t, err)
				require.Equal(t, trainerReg.BatchSize, info.BatchSize, "the API is not wedged")
				require.NoError(t, <-registering)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := atropostest.NewServer(t)
			tr := startTrainer(t, srv, 0)
			clock := newManualClock()
			c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.Now = clock.now })
			ctx := context.Background()
			for i := range 4 { // one batch: the step moves to 1
				require.NoError(t, c.Send(ctx, group(float64(i+1), 2)))
			}
			b, err := tr.Batch(ctx)
			require.NoError(t, err)
			require.Len(t, b, 4)
			_, err = c.Status(ctx)
			require.NoError(t, err)

			hold := srv.HoldNext("/status-env")
			sent := make(chan error, 1)
			go func() { sent <- c.Send(ctx, group(9, 2)) }()
			<-hold.Held() // the old API answered the check; the answer is on its way
			require.NoError(t, srv.Restart())
			after := tt.restarted(t, srv)
			clock.advance(time.Hour) // the answer takes long to arrive
			srv.ResetRequests()
			hold.Release()
			// The env acts on the answer: it posts, checks again, or (taking itself for
			// paused) registers again.
			testctx.Eventually(t, func() bool {
				return srv.RequestCount("/scored_data")+srv.RequestCount("/status-env")+srv.RequestCount("/info") > 0
			}, time.Millisecond)

			after(t)
			select {
			case err := <-sent:
				require.NoError(t, err)
			case <-testctx.Context(t).Done():
				t.Fatal("Send did not return")
			}
			var ours []int
			for _, e := range srv.Envs() {
				if e.DesiredName == "env" {
					ours = append(ours, e.ID)
				}
			}
			require.Len(t, ours, 1, "registered once with the restarted API")
			var got []int
			for _, g := range srv.Received() {
				if g.Scores[0] == 9 {
					got = append(got, *g.EnvID)
				}
			}
			if diff := cmp.Diff([]int{ours[0]}, got); diff != "" {
				t.Errorf("env ids of the group posted after the restart (-want +got):\n%s", diff)
			}
			require.Equal(t, ours[0], c.Registration().EnvID)
			// Lost, or given up as paused: the held answer is an hour old.
			require.Equal(t, 1, c.Resets()+c.Retired())
		})
	}
}

// steppingClock reads a time step later at every reading: each status check the client
// times comes back step old.
type steppingClock struct {
	base time.Time
	off  atomic.Int64
	step time.Duration
}

func (s *steppingClock) now() time.Time {
	return s.base.Add(time.Duration(s.off.Add(int64(s.step))))
}

// TestSlowStatusChecksStillPost: when every status round trip takes longer than
// MaxCheckAge (a loaded API, a slow link), the post must still go out: the limit widens
// after checks in a row that came back too old, instead of checking forever.
func TestSlowStatusChecksStillPost(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	clock := &steppingClock{base: time.Now(), step: 3 * atropos.DefaultMaxCheckAge / 2}
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.Now = clock.now })
	srv.ResetRequests()
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	require.NoError(t, c.Send(ctx, group(1, 2)), "the group is posted although every check is 1.5 × MaxCheckAge old")
	require.Equal(t, 1, srv.RequestCount("/scored_data"))
	// Three checks at MaxCheckAge, then the limit is 2 × MaxCheckAge: the fourth passes.
	require.Equal(t, 4, srv.RequestCount("/status-env"))
}

// varClock reads a time step later at every reading, with a step the test changes.
type varClock struct {
	base time.Time
	off  atomic.Int64
	step atomic.Int64
}

func (v *varClock) now() time.Time {
	return v.base.Add(time.Duration(v.off.Add(v.step.Load())))
}

// TestSlowAPICheckLimitIsLearned: the widened status check limit is kept across posts
// (one check per post once learned, not a climb every time), comes down again when
// answers are fast, and the climb ends with an error, not a loop, when even the widest
// limit is too short for the API.
func TestSlowAPICheckLimitIsLearned(t *testing.T) {
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	clock := &varClock{base: time.Now()}
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) {
		c.Now = clock.now
		c.PauseLimit = time.Hour // the clock jumps; this test is not about pauses
		c.Retry.MaxAttempts = 1
	})
	ctx := context.Background()
	checks := func(id float64) int {
		t.Helper()
		before := srv.RequestCount("/status-env")
		require.NoError(t, c.Send(ctx, group(id, 2)))
		return srv.RequestCount("/status-env") - before
	}
	slow := int64(3 * atropos.DefaultMaxCheckAge / 2) // every check comes back 1.5 × MaxCheckAge old
	clock.step.Store(slow)
	require.Equal(t, 4, checks(1), "three too old at MaxCheckAge, the fourth within twice it")
	require.Equal(t, 2*atropos.DefaultMaxCheckAge, c.StatusCheckLimit())
	require.Equal(t, 1, checks(2), "the limit is learned")
	require.Equal(t, 1, checks(3))

	clock.step.Store(int64(atropos.DefaultMaxCheckAge / 10)) // fast again
	require.Equal(t, 1, checks(4))
	require.Equal(t, atropos.DefaultMaxCheckAge, c.StatusCheckLimit(), "the limit comes down")
	clock.step.Store(slow)
	require.Equal(t, 4, checks(5), "and is learned again")

	// An API slower than 64 × MaxCheckAge: three checks at each limit from the learned
	// one (2×) to the widest (64×), then the post gives up (the group stays in the spool).
	clock.step.Store(int64(100 * atropos.DefaultMaxCheckAge))
	before := srv.RequestCount("/status-env")
	err := c.Send(ctx, group(6, 2))
	require.ErrorIs(t, err, atropos.ErrSpooled)
	require.ErrorContains(t, err, "too slowly")
	require.Equal(t, 18, srv.RequestCount("/status-env")-before)
	require.Equal(t, 64*atropos.DefaultMaxCheckAge, c.StatusCheckLimit())
	require.Equal(t, []float64{1, 2, 3, 4, 5}, scoresOf(srv.Received()))
}
