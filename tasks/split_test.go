package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

func numbered(n int) []tasks.Task {
	ts := make([]tasks.Task, n)
	for i := range ts {
		ts[i] = tasks.Task{ID: fmt.Sprintf("t%03d", i), Statement: "s"}
	}
	return ts
}

func ids(ts []tasks.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sortedIDs(parts ...[]tasks.Task) []string {
	var out []string
	for _, p := range parts {
		out = append(out, ids(p)...)
	}
	sort.Strings(out)
	return out
}

func TestSplitSizes(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		cfg       tasks.SplitConfig
		wantTrain int
		wantEval  int
	}{
		{name: "eval size wins", n: 20, wantTrain: 10, wantEval: 10},
		{name: "ratio wins", n: 100, wantTrain: 85, wantEval: 15},
		{name: "ratio floors", n: 99, wantTrain: 85, wantEval: 14},
		{name: "one left to train", n: 11, wantTrain: 1, wantEval: 10},
		{name: "custom size and ratio", n: 10, cfg: tasks.SplitConfig{EvalSize: 2, EvalSplitRatio: 0.5}, wantTrain: 5, wantEval: 5},
		{name: "small dataset, small eval", n: 3, cfg: tasks.SplitConfig{EvalSize: 1}, wantTrain: 2, wantEval: 1},
		{name: "no eval: every task trains", n: 1, cfg: tasks.SplitConfig{EvalSize: tasks.NoEval}, wantTrain: 1},
		{name: "no eval whatever the ratio", n: 100, cfg: tasks.SplitConfig{EvalSize: tasks.NoEval, EvalSplitRatio: 0.5}, wantTrain: 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			all := numbered(tc.n)
			train, eval, err := tasks.Split(all, tc.cfg)
			require.NoError(t, err)
			require.Len(t, train, tc.wantTrain)
			require.Len(t, eval, tc.wantEval)
			if diff := cmp.Diff(ids(all), sortedIDs(train, eval)); diff != "" {
				t.Errorf("train ∪ eval is not the input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitReproducible(t *testing.T) {
	all := numbered(50)
	train1, eval1, err := tasks.Split(all, tasks.SplitConfig{Seed: 7})
	require.NoError(t, err)
	train2, eval2, err := tasks.Split(all, tasks.SplitConfig{Seed: 7})
	require.NoError(t, err)
	require.Equal(t, ids(train1), ids(train2))
	require.Equal(t, ids(eval1), ids(eval2))
	train3, _, err := tasks.Split(all, tasks.SplitConfig{Seed: 8})
	require.NoError(t, err)
	require.NotEqual(t, ids(train1), ids(train3), "another seed gives another order")
	require.Equal(t, "t000", all[0].ID, "the input is not modified")
}

func TestSplitErrors(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		cfg      tasks.SplitConfig
		tooSmall bool
		want     string
	}{
		{name: "as many as eval size", n: 10, tooSmall: true, want: "10 tasks, 10 held out"},
		{name: "empty", n: 0, tooSmall: true, want: "0 tasks"},
		{name: "negative eval size", n: 50, cfg: tasks.SplitConfig{EvalSize: -2}, want: "EvalSize -2 is negative"},
		{name: "no eval of no tasks", n: 0, cfg: tasks.SplitConfig{EvalSize: tasks.NoEval}, tooSmall: true, want: "no tasks to train on"},
		{name: "ratio one", n: 50, cfg: tasks.SplitConfig{EvalSplitRatio: 1}, want: "outside [0, 1)"},
		{name: "negative ratio", n: 50, cfg: tasks.SplitConfig{EvalSplitRatio: -0.1}, want: "outside [0, 1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tasks.Split(numbered(tc.n), tc.cfg)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.tooSmall, errors.Is(err, tasks.ErrDatasetTooSmall))
		})
	}
}

func TestBuiltinSplit(t *testing.T) {
	train, eval := tasks.BuiltinSplit(1)
	require.Len(t, train, 6)
	require.Len(t, eval, 2)
	require.Equal(t, sortedIDs(tasks.Builtin()), sortedIDs(train, eval))
	train2, eval2 := tasks.BuiltinSplit(1)
	require.Equal(t, ids(train), ids(train2))
	require.Equal(t, ids(eval), ids(eval2))
	for _, task := range append(train, eval...) {
		require.NotEmpty(t, task.ReferenceSolution, task.ID)
	}
}

func TestCycle(t *testing.T) {
	ctx := context.Background()
	all := numbered(5)
	next := func(c *tasks.Cycle, n int) []string {
		var out []string
		for range n {
			task, err := c.Next(ctx)
			require.NoError(t, err)
			out = append(out, task.ID)
		}
		return out
	}
	c1, err := tasks.NewCycle(all, 3)
	require.NoError(t, err)
	require.Equal(t, 5, c1.Len())
	seq := next(c1, 15)
	for pass := range 3 {
		got := append([]string(nil), seq[pass*5:pass*5+5]...)
		sort.Strings(got)
		require.Equal(t, ids(all), got, "pass %d is a permutation", pass)
	}
	require.NotEqual(t, seq[:5], seq[5:10], "each pass is reshuffled") // fixed seed: deterministic

	c2, err := tasks.NewCycle(all, 3)
	require.NoError(t, err)
	require.Equal(t, seq, next(c2, 15), "same seed, same sequence")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c2.Next(canceled)
	require.ErrorIs(t, err, context.Canceled)

	_, err = tasks.NewCycle(nil, 0)
	require.ErrorIs(t, err, tasks.ErrNoTasks)
}

func TestCycleConcurrent(t *testing.T) {
	c, err := tasks.NewCycle(numbered(7), 1)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		count = map[string]int{}
		wg    sync.WaitGroup
	)
	for range 7 {
		wg.Go(func() {
			for range 10 {
				task, err := c.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				count[task.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for id, n := range count {
		require.Equal(t, 10, n, "task %s: 70 draws over 7 tasks are 10 full passes", id)
	}
	require.Len(t, count, 7)
}

func TestSourceFunc(t *testing.T) {
	var src tasks.Source = tasks.SourceFunc(func(context.Context) (tasks.Task, error) {
		return tasks.Task{ID: "x"}, nil
	})
	task, err := src.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, "x", task.ID)
}
