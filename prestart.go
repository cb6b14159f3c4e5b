package agenticopd

import (
	"context"
	"sync"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// prestarting is the training Source of an env whose sandbox factory is a
// [rollout.Prestarter]: each draw also draws the task after it, holds it for the next
// draw, and asks the factory to start that task's sandboxes (2×GroupSize: the
// rollouts' and their grading's) while the drawn task's group runs. The order of the
// tasks is the source's own.
type prestarting struct {
	src   tasks.Source
	f     rollout.Prestarter
	n     int
	mu    sync.Mutex
	ahead []tasks.Task // drawn from src, not yet handed out, oldest first
}

func (p *prestarting) Next(ctx context.Context) (tasks.Task, error) {
	t, ok := p.take()
	if !ok {
		var err error
		if t, err = p.src.Next(ctx); err != nil {
			return t, err
		}
	}
	// The task after t. A source that fails here fails again on the next draw,
	// which then returns its error; nothing is lost.
	if next, err := p.src.Next(ctx); err == nil {
		p.mu.Lock()
		p.ahead = append(p.ahead, next)
		p.mu.Unlock()
		p.f.Prestart(ctx, sandboxSpec(next), p.n)
	}
	return t, nil
}

func (p *prestarting) take() (tasks.Task, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ahead) == 0 {
		return tasks.Task{}, false
	}
	t := p.ahead[0]
	p.ahead = p.ahead[1:]
	return t, true
}

// sandboxSpec is the spec of the sandboxes a task's rollouts run in: its image's for a
// repository task, the zero spec (NewSandbox) for a function-level one.
func sandboxSpec(t tasks.Task) rollout.SandboxSpec {
	if t.Repo != nil {
		return repoSpec(t.Repo)
	}
	return rollout.SandboxSpec{}
}
