package agenticopd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/scorer"
)

// TestMaxTeacherRequests collects groups at once and checks that no more teacher
// requests than MaxTeacherRequests are in flight at any time.
func TestMaxTeacherRequests(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	for _, tc := range []struct {
		name  string
		limit int
		want  int32
	}{{"default", 0, agenticopd.DefaultMaxTeacherRequests}, {"one", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var inFlight, most atomic.Int32
			var mu sync.Mutex
			f := newFixture(t, nil)
			teacher := f.client
			cfg := agenticopd.Config{Policy: f.client, GroupSize: 2, DistillTopK: topK, MaxRollouts: 8,
				KeepEqualScores: true, MaxTeacherRequests: tc.limit,
				Judge: judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
					return judge.Hint{Text: hintText, Votes: []judge.Vote{{Score: 1, Hint: hintText}}}, ctx.Err()
				}),
				Teacher: scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					mu.Lock()
					most.Store(max(most.Load(), n))
					mu.Unlock()
					time.Sleep(200 * time.Millisecond) // long enough for the other groups to arrive
					return teacher.Score(ctx, req)
				})}
			env, err := agenticopd.NewEnv(cfg)
			require.NoError(t, err)
			var eg errgroup.Group
			var scored atomic.Int32
			for range 4 {
				eg.Go(func() error {
					g, err := env.CollectGroup(t.Context(), f.task)
					if err == nil && g.OPD.Metrics.TeacherRequests > 0 {
						scored.Add(1)
					}
					return err
				})
			}
			require.NoError(t, eg.Wait())
			require.Equal(t, int32(4), scored.Load(), "every group asked the teacher")
			assert.LessOrEqual(t, most.Load(), tc.want, "teacher requests in flight at once")
		})
	}
}

func TestMaxTeacherRequestsNegative(t *testing.T) {
	f := newFixture(t, nil)
	_, err := agenticopd.NewEnv(agenticopd.Config{Policy: f.client, MaxTeacherRequests: -1})
	require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
	assert.ErrorContains(t, err, "MaxTeacherRequests")
}
