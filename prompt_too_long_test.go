package agenticopd_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// logRecords keeps the records a logger wrote.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// warnings are the warn-level messages logged about task id.
func (l *logRecords) warnings(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level != slog.LevelWarn {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "task" && a.Value.String() == id {
				out = append(out, r.Message)
			}
			return true
		})
	}
	return out
}

// TestPromptTooLong: a task whose prompt leaves the policy's context no room to
// generate gets no turn in any rollout. Such rollouts are not scored (as in the
// original): the group is dropped (env/dropped_groups/prompt_too_long), never written
// or sent, stays out of train/*, and the task is logged once however often it comes.
func TestPromptTooLong(t *testing.T) {
	long := tasks.Task{ID: "long", Statement: "Say that you are done. " + strings.Repeat("Some more words of context. ", 1000)}
	short := tasks.Task{ID: "short", Statement: "Say that you are done."}
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("long")), vllmtest.WithMaxModelLen(2048))
	logs := &logRecords{}
	var next atomic.Int64
	env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
		c.Logger = slog.New(logs)
		c.KeepEqualScores = true
		c.Tasks = tasks.SourceFunc(func(ctx context.Context) (tasks.Task, error) {
			return []tasks.Task{long, short}[(next.Add(1)-1)%2], ctx.Err() // long, short, long…
		})
	})
	ctx := context.Background()

	for range 2 {
		g, err := env.CollectGroup(ctx, long)
		require.NoError(t, err)
		require.Equal(t, agenticopd.DropPromptTooLong, g.Dropped)
		for _, r := range g.Rollouts {
			require.Zero(t, r.Trajectory.TurnsUsed)
		}
		for k := range g.Metrics {
			require.False(t, strings.HasPrefix(k, "train/"), "the group's metrics have %s", k)
		}
	}
	g, err := env.CollectGroup(ctx, short)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	shortMean := (g.Rollouts[0].Reward.Reward + g.Rollouts[1].Reward.Reward) / 2
	require.Positive(t, shortMean)

	m := env.Metrics()
	require.Equal(t, 2.0, m["env/dropped_groups/prompt_too_long"])
	require.Equal(t, 2.0, m["train/total_rollouts"], "only the short task's rollouts")
	require.InDelta(t, shortMean, m["train/mean_reward"], 1e-12)
	require.Len(t, logs.warnings("long"), 1, "said once")
	require.Contains(t, logs.warnings("long")[0], "prompt")
	require.Empty(t, logs.warnings("short"))

	// Process writes only groups it can train on: the next tasks are long, short.
	var out bytes.Buffer
	require.NoError(t, env.Process(ctx, 1, &out))
	var groups []*atropos.ScoredDataGroup
	require.NoError(t, atropos.ReadJSONL(&out, func(g *atropos.ScoredDataGroup) error {
		groups = append(groups, g)
		return nil
	}))
	require.Len(t, groups, 1)
	require.Positive(t, groups[0].Scores[0])
	require.Equal(t, 3.0, env.Metrics()["env/dropped_groups/prompt_too_long"])
	require.Len(t, logs.warnings("long"), 1, "said once")
}
