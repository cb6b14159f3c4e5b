package agenticopd

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// ErrNoSpecFactory is wrapped by the error of a repository task's rollout when the
// sandbox factory cannot make a sandbox for an image: set Config.Images (the default
// factory), or give a Config.SandboxFactory that implements [rollout.SpecFactory].
var ErrNoSpecFactory = errors.New("agenticopd: a repository task needs a sandbox factory for images " +
	"(set Config.Images, or a Config.SandboxFactory that implements rollout.SpecFactory)")

// repoSpec is the sandbox a repository task's rollouts and grading run in.
func repoSpec(r *tasks.Repo) rollout.SandboxSpec {
	return rollout.SandboxSpec{Image: r.Image, WorkDir: r.Dir(), Network: r.Network}
}

// runRepoRollout runs one agent on a repository task: in a sandbox of the task's
// image (prepared by reward.PrepareRepo), graded by reward.VerifyRepo in a fresh
// sandbox of the same image. As for every rollout, only what no agent action can
// cause (the image, the factory, the grading sandbox, the task's own data) is an
// error; what the agent did to its sandbox is scored.
func (e *Env) runRepoRollout(ctx context.Context, agent *rollout.Agent, task tasks.Task, factory rollout.SandboxFactory) (Rollout, error) {
	sf, ok := factory.(rollout.SpecFactory)
	if !ok {
		return Rollout{}, ErrNoSpecFactory // the caller names the task
	}
	spec := repoSpec(task.Repo)
	sb, err := sf.NewSandboxFor(ctx, spec)
	if err != nil {
		e.metrics.count("env/sandbox_failures", 1)
		return Rollout{}, fmt.Errorf("%w: sandbox for image %s: %w", ErrRolloutFailed, spec.Image, err)
	}
	defer sb.Close()
	if err := reward.PrepareRepo(ctx, sb, task.Repo); err != nil {
		e.metrics.count("env/sandbox_failures", 1)
		return Rollout{}, fmt.Errorf("%w: %w", ErrRolloutFailed, err)
	}

	fresh := rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
		return sf.NewSandboxFor(ctx, spec)
	})
	return e.runAndScore(ctx, agent, task, sb, func(ctx context.Context) (reward.Verification, error) {
		return reward.VerifyRepo(ctx, sb, fresh, task, reward.RepoOptions{TestTimeout: e.cfg.RepoTestTimeout})
	})
}
