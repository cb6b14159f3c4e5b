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
// Unlike CollectGroup, it cannot drop a rollout whose group has equal scores: the
// group is formed by the trainer, after the fact. A rollout that could not be carried
// out fails with an error wrapping [ErrRolloutFailed], as in a group.
//
// The Outcome's Components are the weighted parts of the default reward (correctness
// w_C·C, efficiency w_E·E, tool_use w_U·U), whose plain sum is its Reward; a custom
// Config.Reward gives no components.
func (e *Env) RunOne(ctx context.Context, task tasks.Task) (nemogym.Outcome, error) {
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
func (e *Env) components(b reward.Breakdown) map[string]float64 {
	d, ok := e.reward.(reward.Default)
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

// NemoGymOutcomes returns the group's rollouts as NeMo Gym outcomes, in order, with
// the group's teacher rows when it has them.
func (e *Env) NemoGymOutcomes(g *Group) []nemogym.Outcome {
	out := make([]nemogym.Outcome, len(g.Rollouts))
	for i, r := range g.Rollouts {
		out[i] = nemogym.Outcome{Trajectory: r.Trajectory, Reward: r.Reward.Reward, Components: e.components(r.Reward)}
		if i < len(g.OPD.Sequences) {
			out[i].Rows = &g.OPD.Sequences[i].Rows
		}
	}
	return out
}

// NemoGymOnGroup returns a Config.OnGroup function that writes every group Process
// (or Serve) finishes to w as NeMo Gym rollouts lines: group n (from 0, in the order
// groups finish) is task index n, its rollouts are rollout indices 0..GroupSize−1.
// Set it after NewEnv, on a Config copy, or wrap it in your own OnGroup:
//
//	w := nemogym.NewWriter(f)
//	var env *agenticopd.Env
//	cfg.OnGroup = func(g *agenticopd.Group) { write(g) } // write := agenticopd.NemoGymOnGroup(env, w)
//
// A write error is kept in w (see [nemogym.Writer.Err]).
func NemoGymOnGroup(e *Env, w *nemogym.Writer) func(*Group) {
	var (
		mu   sync.Mutex
		next int64
	)
	return func(g *Group) {
		mu.Lock()
		idx := next
		next++
		mu.Unlock()
		for i, out := range e.NemoGymOutcomes(g) {
			_ = w.WriteOutcome(idx, int64(i), g.Task, out)
		}
	}
}
