package agenticopd

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// RunOne runs ONE rollout of task, verifies and scores it as [Env.CollectGroup] does
// (same agent, same sandbox, same verification, same reward), and, unless OPD is off
// or the rollout reaches MaxTokenLen, asks the judge and the teacher for its rows as
// the Atropos path does for each sequence of a group. It implements
// [nemogym.Runner]: the NeMo Gym agent server calls it once per POST /run.
//
// When ctx carries a [nemogym.Session] (the agent server's), RunOne tells it the
// agent's tools and chat-template kwargs, so that a [nemogym.Policy] sends them.
//
// Unlike CollectGroup, it cannot drop a rollout whose group has equal scores: the
// group is formed by the trainer, after the fact. A rollout that could not be carried
// out fails with an error wrapping [ErrRolloutFailed], as in a group.
//
// The Outcome's Components are the weighted parts of the default reward (correctness
// w_C·C, efficiency w_E·E, tool_use w_U·U), whose plain sum is its Reward; a custom
// Config.Reward gives no components.
func (e *Env) RunOne(ctx context.Context, task tasks.Task) (nemogym.Outcome, error) {
	if s := nemogym.SessionFrom(ctx); s != nil {
		s.SetTemplate(e.agent.ToolDefinitions(), e.cfg.ChatTemplateKwargs)
	}
	r, err := e.runRollout(ctx, e.agent, task)
	if err != nil {
		if ctx.Err() == nil {
			e.metrics.count("env/failed_rollouts", 1)
		}
		return nemogym.Outcome{}, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
	}
	e.metrics.addTrain([]Rollout{r})
	out := nemogym.Outcome{Trajectory: r.Trajectory, Reward: r.Reward.Reward, Components: e.components(r.Reward)}
	if e.cfg.DisableOPD || (e.cfg.MaxTokenLen > 0 && len(r.Trajectory.Tokens) >= e.cfg.MaxTokenLen) {
		return out, nil
	}
	d, err := e.distill(ctx)
	if err != nil {
		return nemogym.Outcome{}, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
	}
	res, err := d.Distill(ctx, []*rollout.Trajectory{r.Trajectory})
	if err != nil {
		return nemogym.Outcome{}, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
	}
	if len(res.Sequences) != 1 {
		return nemogym.Outcome{}, fmt.Errorf("agenticopd: task %s: opd returned %d sequences for 1", task.ID, len(res.Sequences))
	}
	e.metrics.addOPD(res.Metrics)
	out.Rows = &res.Sequences[0].Rows
	return out, nil
}

// components returns the weighted parts of the default reward, nil for another.
func (e *Env) components(b reward.Breakdown) map[string]float64 { return componentsOf(e.reward, b) }

// componentsOf returns the weighted parts of b when r is the default reward: their
// plain sum is b.Reward (the default's clamp to [0, 1] never cuts a sum of parts
// weighted by non-negative weights that sum to at most 1). Nil for another reward.
func componentsOf(r reward.Reward, b reward.Breakdown) map[string]float64 {
	d, ok := r.(reward.Default)
	if !ok {
		return nil
	}
	w := d.Weights
	if w == (reward.Weights{}) {
		w = reward.DefaultWeights
	}
	return map[string]float64{
		"correctness": w.Correctness * b.Correctness,
		"efficiency":  w.Efficiency * b.Efficiency,
		"tool_use":    w.ToolUsage * b.ToolUsage,
	}
}

// NemoGymOnGroup returns a Config.OnGroup function that writes every group Process
// (or Serve) finishes to w as NeMo Gym rollouts lines, beside the Atropos JSONL:
// group n (from 0, in the order groups finish) is task index n, its rollouts are
// rollout indices 0..GroupSize−1, with the group's teacher rows when it has them.
// cfg is the Config the Env is made with (its reward decides the components):
//
//	w := nemogym.NewWriter(f)
//	cfg.OnGroup = agenticopd.NemoGymOnGroup(w, cfg)
//	env, err := agenticopd.NewEnv(cfg)
//
// A write error is kept in w (see [nemogym.Writer.Err]); a group whose rewards do
// not sum from their parts is not written, and makes that error.
func NemoGymOnGroup(w *nemogym.Writer, cfg Config) func(*Group) {
	rew := cfg.Reward
	if rew == nil {
		rew = reward.Default{Weights: cfg.Weights}
	}
	var (
		mu   sync.Mutex
		next int64
	)
	return func(g *Group) {
		mu.Lock()
		idx := next
		next++
		mu.Unlock()
		for i, r := range g.Rollouts {
			out := nemogym.Outcome{Trajectory: r.Trajectory, Reward: r.Reward.Reward, Components: componentsOf(rew, r.Reward)}
			if i < len(g.OPD.Sequences) {
				out.Rows = &g.OPD.Sequences[i].Rows
			}
			w.Fail(w.WriteOutcome(idx, int64(i), g.Task, out))
		}
	}
}
