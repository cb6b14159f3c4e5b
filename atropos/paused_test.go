package atropos_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
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
