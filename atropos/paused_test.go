package atropos_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// TestPausedAcrossARestart: the env process is stopped (or simply idle) while the API
// restarts, the trainer registers again at the step it had reached (so the step does
// not go back) and another env takes this env's old id. No request of this env failed,
// so only what /status-env shows for the id can tell: a queue that does not match what
// this env sent. The env must register again and neither post nor disconnect under the
// other env's id.
func TestPausedAcrossARestart(t *testing.T) {
	tests := []struct {
		name string
		// before runs while the first API lives: what this env sent and saw. It
		// returns the step the trainer reached.
		before func(t *testing.T, c *atropos.Client, tr *atropos.Trainer) int
		// otherSends is how many groups the other env posts under the old id.
		otherSends int
		// disconnect: the env's first act after the restart is Disconnect, not Send.
		disconnect bool
		// want are the scores of this env's groups in the restarted API's queue.
		want []float64
	}{
		{
			name: "another env queued groups under the id; then a Send",
			before: func(t *testing.T, c *atropos.Client, tr *atropos.Trainer) int {
				sendBatch(t, c, tr)
				return 1
			},
			otherSends: 2,
			// 1 to 4 were out of the queue, not known served: sent again.
			want: []float64{1, 2, 3, 4, 9},
		},
		{
			name: "another env queued groups under the id; then a Disconnect",
			before: func(t *testing.T, c *atropos.Client, tr *atropos.Trainer) int {
				sendBatch(t, c, tr)
				return 1
			},
			otherSends: 1,
			disconnect: true,
		},
		{
			name: "this env's queued groups are gone; then a Send",
			before: func(t *testing.T, c *atropos.Client, _ *atropos.Trainer) int {
				require.NoError(t, c.Send(context.Background(), group(1, 2)))
				require.NoError(t, c.Send(context.Background(), group(2, 2)))
				return 0
			},
			want: []float64{1, 2, 9}, // sent again: the restart lost them
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			srv := atropostest.NewServer(t)
			tr := startTrainer(t, srv, 0)
			c := registered(t, srv, t.TempDir())
			step := tt.before(t, c, tr)

			// The env sleeps through this.
			require.NoError(t, srv.Restart())
			startTrainer(t, srv, step)
			other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
			require.Equal(t, c.Registration().EnvID, other.Registration().EnvID, "the other env has this env's old id")
			for i := range tt.otherSends {
				require.NoError(t, other.Send(ctx, group(float64(100+i), 2)))
			}

			if tt.disconnect {
				require.ErrorIs(t, c.Disconnect(ctx), atropos.ErrRegistrationLost)
			} else {
				require.NoError(t, c.Send(ctx, group(9, 2)))
				require.NoError(t, c.Flush(ctx)) // the groups the restart lost
				require.Equal(t, 1, c.Resets())
				require.NotEqual(t, other.Registration().EnvID, c.Registration().EnvID)
			}
			ours := map[int][]float64{}
			for _, g := range srv.Queue() {
				if g.Scores[0] < 100 {
					ours[*g.EnvID] = append(ours[*g.EnvID], g.Scores[0])
				}
			}
			want := map[int][]float64{}
			if len(tt.want) > 0 {
				want[c.Registration().EnvID] = tt.want
			}
			for _, v := range ours {
				slices.Sort(v)
			}
			if diff := cmp.Diff(want, ours); diff != "" {
				t.Errorf("this env's groups in the restarted API, by env id (-want +got):\n%s", diff)
			}
			require.True(t, srv.Envs()[other.Registration().EnvID].Connected, "the other env stays connected")
		})
	}
}

// sendBatch sends one batch of groups (four of two sequences) and lets the trainer pull
// it, so that the step moves to 1 and the env sees it.
func sendBatch(t *testing.T, c *atropos.Client, tr *atropos.Trainer) {
	t.Helper()
	ctx := context.Background()
	for i := range 4 {
		require.NoError(t, c.Send(ctx, group(float64(i+1), 2)))
	}
	b, err := tr.Batch(ctx)
	require.NoError(t, err)
	require.Len(t, b, 4)
	_, err = c.Status(ctx)
	require.NoError(t, err)
}

// TestNewTrainerConfigurationIsAReset: a request fails (the API is unreachable for a
// moment), and meanwhile the API restarted, a trainer registered with another batch
// size at the step this env saw, and another env took this env's id. /status-env
// answers for the id as if nothing happened; /info's batch size shows the restart.
func TestNewTrainerConfigurationIsAReset(t *testing.T) {
	ctx := context.Background()
	srv := atropostest.NewServer(t)
	startTrainer(t, srv, 0)
	c := registered(t, srv, t.TempDir())
	srv.SetDown(true)
	_, err := c.Status(ctxTimeout(t, 50*time.Millisecond))
	require.Error(t, err, "the API does not answer")
	require.NoError(t, srv.Restart())
	reg := trainerReg
	reg.BatchSize = 16
	srv.RegisterTrainer(reg)
	srv.StartTrainer()
	srv.SetDown(false)
	other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
	require.Equal(t, 0, other.Registration().EnvID)

	require.NoError(t, c.Send(ctx, group(9, 2)))
	require.Equal(t, 1, c.Resets())
	require.Equal(t, 1, c.Registration().EnvID)
	require.Equal(t, 16, c.Registration().BatchSize)
	require.Equal(t, []int{1}, envIDs(srv.Queue()))
}

// pauseLimit is the helper env's ClientConfig.PauseLimit in TestStoppedProcessAcrossARestart.
const pauseLimit = 300 * time.Millisecond

// helperPauseEnv is the env process of TestStoppedProcessAcrossARestart: it registers,
// prints "registered <id>", then polls /status-env every few milliseconds and obeys
// its stdin: "send N" sends group N and prints "accepted N"; "status" prints the step
// and queue it sees; "disconnect" disconnects
// and prints "disconnected" or "not disconnected: <why>", and exits.
func helperPauseEnv() int {
	c, err := atropos.NewClient(os.Getenv("ATROPOS_URL"), atropos.ClientConfig{
		EnvName: "paused", GroupSize: 2, SpoolDir: os.Getenv("ATROPOS_SPOOL"), PauseLimit: pauseLimit, MaxCheckAge: pauseLimit / 6,
		PollInterval: 2 * time.Millisecond, StatusInterval: 2 * time.Millisecond,
		Retry: atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if err := c.Register(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("registered %d\n", c.Registration().EnvID)
	var mu sync.Mutex // one request at a time, so that the order is the test's
	go func() {
		for {
			mu.Lock()
			_, _ = c.Status(ctx)
			mu.Unlock()
			time.Sleep(3 * time.Millisecond)
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		mu.Lock()
		switch cmd := sc.Text(); {
		case strings.HasPrefix(cmd, "send "):
			n, _ := strconv.Atoi(strings.TrimPrefix(cmd, "send "))
			if err := c.Send(ctx, group(float64(n), 2)); err != nil {
				fmt.Println("error", err)
			} else {
				fmt.Println("accepted", n)
			}
		case cmd == "status":
			st, err := c.Status(ctx)
			fmt.Println("step", st.CurrentStep, "queued", st.SelfQueueSize, err)
		case cmd == "disconnect":
			if err := c.Disconnect(ctx); err != nil {
				fmt.Println("not disconnected:", err)
			} else {
				fmt.Println("disconnected")
			}
			return 0
		}
		mu.Unlock()
	}
	return 0
}

// TestStoppedProcessAcrossARestart: the env process is stopped (SIGSTOP) while the API
// restarts, the trainer registers again at the step it had reached and another env
// registers with nothing queued and takes the env's old id: what /status-env shows for
// the id matches what the env could have there. When the process goes on, it has been
// stopped for longer than its PauseLimit, so it must register again before any post, and
// never disconnect the other env. 20 runs, half of them with a Send as the first act
// after the pause, half with a Disconnect (the env's background polls run in both).
func TestStoppedProcessAcrossARestart(t *testing.T) {
	for run := range 20 {
		disconnect := run%2 == 1
		t.Run(fmt.Sprintf("run %d disconnect %v", run, disconnect), func(t *testing.T) {
			ctx := context.Background()
			srv := atropostest.NewServer(t)
			tr := startTrainer(t, srv, 0)
			env := startChild(t, "ATROPOS_TEST_HELPER=pause-env", "ATROPOS_URL="+srv.URL(), "ATROPOS_SPOOL="+t.TempDir())
			line := func() string {
				select {
				case l := <-env.lines:
					return l
				case <-testctx.Context(t).Done(): // a guard against a hang
					t.Fatal("the env process said nothing")
					return ""
				}
			}
			require.Equal(t, "registered 0", line())
			// One batch: 4 groups, pulled; the env sees the step move and has nothing
			// queued.
			for i := range 4 {
				_, err := fmt.Fprintf(env.stdin, "send %d\n", i+1)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("accepted %d", i+1), line())
			}
			b, err := tr.Batch(ctx)
			require.NoError(t, err)
			require.Len(t, b, 4)
			_, err = fmt.Fprintln(env.stdin, "status")
			require.NoError(t, err)
			require.Equal(t, "step 1 queued 0 <nil>", line(), "the env saw the step move")

			require.NoError(t, env.cmd.Process.Signal(syscall.SIGSTOP))
			stopped := time.Now()
			before := len(srv.Received()) // of every life of the API
			require.NoError(t, srv.Restart())
			startTrainer(t, srv, 1)
			other := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.EnvName = "other" })
			require.Equal(t, 0, other.Registration().EnvID, "the other env has the stopped env's old id")
			time.Sleep(pauseLimit - time.Since(stopped) + 10*time.Millisecond) // stopped longer than PauseLimit
			srv.ResetRequests()
			require.NoError(t, env.cmd.Process.Signal(syscall.SIGCONT))

			if disconnect {
				_, err := fmt.Fprintln(env.stdin, "disconnect")
				require.NoError(t, err)
				// Either the disconnect finds the pause and sends nothing, or a background
				// poll found it first and the env registered again: then it disconnects
				// its new registration.
				l := line()
				if l == "disconnected" {
					var ours []int
					for _, e := range srv.Envs() {
						if e.DesiredName == "paused" {
							ours = append(ours, e.ID)
						}
					}
					require.Len(t, ours, 1, "disconnected after registering again")
					require.False(t, srv.Envs()[ours[0]].Connected)
				} else {
					require.True(t, strings.HasPrefix(l, "not disconnected:"), l)
				}
			} else {
				_, err := fmt.Fprintln(env.stdin, "send 9")
				require.NoError(t, err)
				require.Equal(t, "accepted 9", line())
				var ours []int
				for _, e := range srv.Envs() {
					if e.DesiredName == "paused" {
						ours = append(ours, e.ID)
					}
				}
				require.Len(t, ours, 1, "registered again with the restarted API")
				for _, g := range srv.Received()[before:] {
					require.NotNil(t, g.EnvID)
					require.Equal(t, ours[0], *g.EnvID, "group %v went under another env's id", g.Scores[0])
				}
			}
			for _, r := range srv.Requests() {
				if r.Path == "/disconnect-env" {
					require.NotContains(t, string(r.Body), `"env_id":0`, "the other env's id was disconnected")
				}
			}
			require.True(t, srv.Envs()[0].Connected, "the other env stays connected")
		})
	}
}
