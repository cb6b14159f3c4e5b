package agenticopd_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// prestartRecorder is a factory that records what it is asked to start ahead.
type prestartRecorder struct {
	rollout.SandboxFactory
	mu    sync.Mutex
	calls []prestartCall
}

type prestartCall struct {
	Spec rollout.SandboxSpec
	N    int
}

func (p *prestartRecorder) NewSandboxFor(ctx context.Context, _ rollout.SandboxSpec) (rollout.Sandbox, error) {
	return p.NewSandbox(ctx)
}

func (p *prestartRecorder) Prestart(_ context.Context, spec rollout.SandboxSpec, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, prestartCall{spec, n})
}

// The env asks a Prestarter for the sandboxes of the task after the one it draws,
// 2×GroupSize of them, and hands the tasks out in the source's order.
func TestEnvPrestartsTheNextTasksSandboxes(t *testing.T) {
	list := []tasks.Task{
		{ID: "a", Statement: "Say a."},
		{ID: "b", Statement: "Say b.", Repo: &tasks.Repo{Image: "agenticopd.local/b:1", WorkDir: "/repo"}},
		{ID: "c", Statement: "Say c."},
		{ID: "d", Statement: "Say d."},
	}
	var mu sync.Mutex
	drawn := 0
	src := tasks.SourceFunc(func(ctx context.Context) (tasks.Task, error) {
		mu.Lock()
		defer mu.Unlock()
		task := list[drawn%len(list)]
		drawn++
		return task, ctx.Err()
	})
	f := &prestartRecorder{SandboxFactory: memSandboxes}
	sim := vllmtest.NewServer(t)
	env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
		c.SandboxFactory, c.Tasks, c.GroupSize = f, src, 3
	})
	var got []string
	for range 3 {
		task, err := env.NextTask(t.Context())
		require.NoError(t, err)
		got = append(got, task.ID)
	}
	require.Equal(t, []string{"a", "b", "c"}, got)
	want := []prestartCall{
		{Spec: rollout.SandboxSpec{Image: "agenticopd.local/b:1", WorkDir: "/repo"}, N: 6},
		{N: 6},
		{N: 6},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("Prestart calls (-want +got):\n%s", diff)
	}
}
