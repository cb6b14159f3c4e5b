package agenticopd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Env collects OPD groups: rollouts in sandboxes, canonical verification, reward,
// hindsight hints and teacher rows. It is safe for concurrent use.
type Env struct {
	cfg       Config
	counts    *requestCounts
	agent     *rollout.Agent
	evalAgent *rollout.Agent
	opdCfg    opd.Config // its MaxTeacherLen is settled by distiller
	opdMu     sync.Mutex
	distiller *opd.Distiller // built on first use; nil until then
	reward    reward.Reward
	train     tasks.Source
	eval      []tasks.Task
	rollouts  *semaphore.Weighted

	sbMu sync.Mutex
	sb   rollout.SandboxFactory

	// tooLong holds the IDs of the tasks whose prompt did not fit, each logged once.
	tooLong sync.Map
	// started numbers the groups CollectGroup and Serve start (Config.SeedSampling).
	started atomic.Int64

	metrics *accumulator
}

// Group is one task's group: its rollouts, what became of them, and the Atropos group.
type Group struct {
	// Task is the task the group worked on.
	Task tasks.Task
	// Rollouts are its GroupSize rollouts, in the order of Data's sequences.
	Rollouts []Rollout
	// Data is the scored group, ready to send or write. It has distill rows unless OPD
	// is disabled or the group was dropped before OPD.
	Data *atropos.ScoredDataGroup
	// Dropped says why a sink would not take the group ("" when it is kept): see
	// [DropScoresEqual], [DropTooLong] and [DropPromptTooLong]. A dropped group got no
	// judge or teacher request.
	Dropped string
	// OPD is what the distillation step did; zero when it did not run.
	OPD opd.Result
	// Metrics are this group's metrics under the reference's names and this library's.
	Metrics map[string]float64
}

// Reasons in [Group.Dropped].
const (
	DropScoresEqual = "scores_equal" // every score is the same (ensure_scores_are_not_same)
	DropTooLong     = "too_long"     // a sequence is at least the trainer's max token length
	// DropPromptTooLong: a rollout never got a turn, because its prompt leaves the
	// policy's context too little room to generate in (rollout.StopContextLength
	// before the first turn). The original does not score such a rollout; its group
	// is never sent or written, in every mode, and stays out of train/*.
	DropPromptTooLong = "prompt_too_long"
)

// Rollout is one agent's attempt at a task.
type Rollout struct {
	Trajectory   *rollout.Trajectory // the token-exact record
	Stats        rollout.Stats       // the agent loop's boundary counts
	Verification reward.Verification // the canonical tests' verdict
	Reward       reward.Breakdown    // the score and its parts
}

// ErrRolloutFailed is wrapped by CollectGroup's error when a rollout could not be
// carried out for a reason no action of the agent can cause: its sandbox could not
// be made, its policy failed, or its tests could not be run (bubblewrap missing, the
// tests' own sandbox failing, the host). Such a group is not returned: a failure of
// the infrastructure is not the student's behaviour and must not be trained on as a
// low score. What the agent can cause (it filled its sandbox's memory or workspace,
// broke its workspace) never fails the group: the rollout scores as the solution's
// fault ([reward.RuleSolutionFault], C = 0.1), counted in env/solution_sandbox_faults.
var ErrRolloutFailed = errors.New("agenticopd: rollout failed")

// NewEnv returns an Env for cfg. It does no I/O: the sandbox is created and probed,
// and the chat template calibrated, on first use. One exception: with Config.Images
// set (and no SandboxFactory) the default sandbox factory is created and probed at
// once, image sandboxes included, so that a host that cannot run them (without root:
// no user namespaces, or a kernel that refuses overlayfs in one) is refused here with
// the reason, wrapping [bwrap.ErrImageUnsupported] or another [bwrap.ProbeError]
// kind, not at the first repository rollout.
//
// A Config it cannot use (no Policy, a negative size or duration) gives an error
// wrapping [ErrInvalidConfig].
func NewEnv(cfg Config) (*Env, error) {
	if cfg.Policy == nil {
		return nil, fmt.Errorf("%w: Policy is required", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Env{cfg: cfg, counts: &requestCounts{}, metrics: newAccumulator(), sb: cfg.SandboxFactory}
	policy := countPolicy(cfg.Policy, e.counts)

	agentCfg := rollout.Config{
		MaxTurns:           cfg.MaxTurns,
		MaxTokens:          cfg.MaxTokens,
		Sampling:           cfg.policySampling(),
		Tools:              cfg.Tools,
		ChatTemplateKwargs: cfg.ChatTemplateKwargs,
		ExtraCloses:        cfg.ExtraCloses,
		Logger:             cfg.Logger,
	}
	var err error
	if e.agent, err = rollout.NewAgent(policy, agentCfg); err != nil {
		return nil, fmt.Errorf("agenticopd: %w", err)
	}
	agentCfg.Greedy = true
	if e.evalAgent, err = rollout.NewAgent(policy, agentCfg); err != nil {
		return nil, fmt.Errorf("agenticopd: %w", err)
	}

	e.reward = cfg.Reward
	if e.reward == nil {
		e.reward = reward.Default{Weights: cfg.Weights}
	}

	if err := e.setupTasks(); err != nil {
		return nil, err
	}
	if !cfg.DisableOPD {
		if err := e.setupOPD(); err != nil {
			return nil, err
		}
	}
	e.rollouts = semaphore.NewWeighted(int64(cfg.MaxRollouts))
	if cfg.Images != nil && cfg.SandboxFactory == nil {
		if _, err := e.sandboxes(context.Background()); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) setupTasks() error {
	cfg := e.cfg
	var train, eval []tasks.Task
	if cfg.Dataset == nil {
		train, eval = tasks.BuiltinSplit(cfg.Seed)
	} else if cfg.Tasks == nil || cfg.EvalTasks == nil {
		var err error
		train, eval, err = tasks.Split(cfg.Dataset, tasks.SplitConfig{Seed: cfg.Seed, EvalSize: cfg.EvalSize, EvalSplitRatio: cfg.EvalSplitRatio})
		if err != nil {
			return fmt.Errorf("agenticopd: %w", err)
		}
	}
	e.train, e.eval = cfg.Tasks, cfg.EvalTasks
	if e.eval == nil {
		e.eval = eval
	}
	if e.train == nil {
		c, err := tasks.NewCycle(train, cfg.Seed)
		if err != nil {
			return fmt.Errorf("agenticopd: training tasks: %w", err)
		}
		e.train = c
	}
	if p, ok := cfg.SandboxFactory.(rollout.Prestarter); ok {
		e.train = &prestarting{src: e.train, f: p, n: 2 * cfg.GroupSize}
	}
	return nil
}

func (e *Env) setupOPD() error {
	cfg := e.cfg
	teacher := cfg.Teacher
	if teacher == nil {
		s, ok := cfg.Policy.(scorer.LogprobScorer)
		if !ok {
			return errors.New("agenticopd: Config.Teacher is required when the Policy cannot score logprobs (or set DisableOPD)")
		}
		teacher = s
	}
	j := cfg.Judge
	if j == nil {
		model := cfg.JudgeModel
		if model == nil {
			m, ok := cfg.Policy.(judge.ChatModel)
			if !ok {
				return errors.New("agenticopd: Config.Judge or Config.JudgeModel is required when the Policy has no chat endpoint (or set DisableOPD)")
			}
			model = m
		}
		llm, err := judge.NewLLM(countChat(model, e.counts, e.metrics), judge.LLMConfig{
			PRMVotes: cfg.PRMVotes, Sampling: cfg.JudgeSampling, MaxTokens: cfg.JudgeMaxTokens,
			ChatTemplateKwargs: cfg.JudgeChatTemplateKwargs, Logger: cfg.Logger,
		})
		if err != nil {
			return fmt.Errorf("agenticopd: %w", err)
		}
		j = llm
	}
	e.opdCfg = opd.Config{
		Judge:                 j,
		Teacher:               limitScorer(countScorer(teacher, e.counts), semaphore.NewWeighted(int64(cfg.MaxTeacherRequests))),
		Templater:             e.agent.Template(),
		Renderer:              e.agent.Template(),
		Placement:             cfg.Placement,
		TopK:                  cfg.DistillTopK,
		HintMaxNextStateChars: cfg.HintMaxNextStateChars,
		MaxTeacherLen:         cfg.TeacherMaxLen,
		Logger:                cfg.Logger,
	}
	if _, err := opd.New(e.opdCfg); err != nil { // settle configuration errors now
		return fmt.Errorf("agenticopd: %w", err)
	}
	return nil
}

// distill returns the Distiller, building it on first use: the teacher's length
// limit, when it is the policy's, is known once the chat template was calibrated.
func (e *Env) distill(ctx context.Context) (*opd.Distiller, error) {
	e.opdMu.Lock()
	defer e.opdMu.Unlock()
	if e.distiller != nil {
		return e.distiller, nil
	}
	cfg := e.opdCfg
	if cfg.MaxTeacherLen == 0 && e.cfg.Teacher == nil {
		cal, err := e.agent.Template().Calibrate(ctx)
		if err != nil {
			return nil, err
		}
		if cal.MaxModelLen > 1 {
			cfg.MaxTeacherLen = cal.MaxModelLen - 1
		}
	}
	d, err := opd.New(cfg)
	if err != nil {
		return nil, err
	}
	e.distiller = d
	return d, nil
}

// sandboxes returns the sandbox factory, creating the default one on first use. A
// failed creation is returned and tried again next time.
func (e *Env) sandboxes(ctx context.Context) (rollout.SandboxFactory, error) {
	e.sbMu.Lock()
	defer e.sbMu.Unlock()
	if e.sb != nil {
		return e.sb, nil
	}
	f, err := bwrap.New(ctx, bwrap.Config{Logger: e.cfg.Logger, Images: e.cfg.Images})
	if err != nil {
		return nil, fmt.Errorf("agenticopd: default sandbox: %w", err)
	}
	e.sb = f
	return f, nil
}

// NextTask returns the next training task.
func (e *Env) NextTask(ctx context.Context) (tasks.Task, error) { return e.train.Next(ctx) }

// EvalTasks returns the tasks Evaluate runs.
func (e *Env) EvalTasks() []tasks.Task { return e.eval }

// CollectGroup runs GroupSize rollouts of task in parallel, verifies and scores them,
// and, unless the group would be dropped, finds hints and teacher rows for them.
//
// The returned group's Data holds one sequence per rollout. A rollout that could not
// be carried out for a reason no agent action can cause (see [ErrRolloutFailed])
// fails the whole group: Atropos wants GroupSize sequences, and a failed rollout says
// nothing about the student. A rollout never fails its group by what it did: a
// sandbox it broke is scored as the solution's fault. Judge failures never fail the
// group (the turn just gets no hint); a teacher failure does. A group whose prompt
// does not fit the policy's context is returned dropped ([DropPromptTooLong]); the
// first time for each task, that is logged at warn level.
func (e *Env) CollectGroup(ctx context.Context, task tasks.Task) (*Group, error) {
	return e.collect(ctx, task, collectOptions{keepEqual: e.cfg.KeepEqualScores, maxTokenLen: e.cfg.MaxTokenLen})
}

type collectOptions struct {
	keepEqual   bool
	maxTokenLen int
	// drawn numbers the group for its sampling seeds (Config.SeedSampling): 1 for the
	// first; 0 numbers it in the order groups start.
	drawn int64
}

// samplingSeed is the seed of the group numbered n for Config.SeedSampling: Seed and
// n mixed (SplitMix64's finalizer), below 2^62 so that adding a rollout's index stays
// positive.
func samplingSeed(seed uint64, n int64) int64 {
	z := seed + uint64(n)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int64((z ^ z>>31) >> 2)
}

func (e *Env) collect(ctx context.Context, task tasks.Task, opts collectOptions) (*Group, error) {
	g := &Group{Task: task, Rollouts: make([]Rollout, e.cfg.GroupSize)}
	var base int64
	if e.cfg.SeedSampling {
		if opts.drawn == 0 {
			opts.drawn = e.started.Add(1)
		}
		base = samplingSeed(e.cfg.Seed, opts.drawn)
	}
	eg, gctx := errgroup.WithContext(ctx)
	for i := range g.Rollouts {
		eg.Go(func() error {
			rctx := gctx
			if e.cfg.SeedSampling {
				rctx = rollout.WithSeed(gctx, base+int64(i))
			}
			r, err := e.runRollout(rctx, e.agent, task)
			if err != nil {
				return fmt.Errorf("rollout %d of task %s: %w", i, task.ID, err)
			}
			g.Rollouts[i] = r
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		if ctx.Err() == nil { // a group cut short by the caller is not a failure
			e.metrics.count("env/failed_groups", 1)
		}
		return nil, err
	}
	tooLong := promptTooLong(g.Rollouts)
	if tooLong {
		if _, seen := e.tooLong.LoadOrStore(task.ID, true); !seen {
			e.cfg.Logger.Warn("task skipped: its prompt leaves the policy no room to generate, so no rollout gets a turn "+
				"(its groups are dropped, counted in env/dropped_groups/prompt_too_long, and not logged again)",
				"task", task.ID, "detail", firstStopDetail(g.Rollouts))
		}
	} else {
		e.metrics.addTrain(g.Rollouts)
	}

	data := &atropos.ScoredDataGroup{GenerationParams: e.generationParams()}
	for _, r := range g.Rollouts {
		t := r.Trajectory
		if err := data.Add(atropos.Sequence{
			Tokens:            t.AtroposTokens(),
			Masks:             t.Masks(),
			Score:             r.Reward.Reward,
			InferenceLogprobs: t.InferenceLogprobs(),
			Messages:          t.Messages,
		}); err != nil {
			return nil, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
		}
	}
	g.Data = data

	switch {
	case tooLong:
		g.Dropped = DropPromptTooLong
	case !opts.keepEqual && data.ScoresEqual():
		g.Dropped = DropScoresEqual
	case opts.maxTokenLen > 0 && longest(data) >= opts.maxTokenLen:
		g.Dropped = DropTooLong
	}
	if g.Dropped != "" {
		e.metrics.count("env/dropped_groups/"+g.Dropped, 1)
	}
	if !e.cfg.DisableOPD && g.Dropped == "" {
		trajs := make([]*rollout.Trajectory, len(g.Rollouts))
		for i, r := range g.Rollouts {
			trajs[i] = r.Trajectory
		}
		d, err := e.distill(ctx)
		var res opd.Result
		if err == nil {
			res, err = d.Distill(ctx, trajs)
		}
		if err != nil {
			e.metrics.addOPD(res.Metrics) // a request the teacher refused was still made
			if ctx.Err() == nil {
				e.metrics.count("env/failed_groups", 1)
			}
			return nil, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
		}
		g.OPD = res
		if err := e.attachRows(data, res); err != nil {
			return nil, fmt.Errorf("agenticopd: task %s: %w", task.ID, err)
		}
		e.metrics.addOPD(res.Metrics)
	}
	g.Metrics = groupMetrics(g)
	e.metrics.count("env/groups", 1)
	return g, nil
}

// runRollout runs one agent in its own sandbox, then verifies and scores it.
func (e *Env) runRollout(ctx context.Context, agent *rollout.Agent, task tasks.Task) (Rollout, error) {
	if err := e.rollouts.Acquire(ctx, 1); err != nil {
		return Rollout{}, err
	}
	defer e.rollouts.Release(1)
	defer e.counts.latency().rolloutSince(time.Now())

	factory, err := e.sandboxes(ctx)
	if err != nil {
		return Rollout{}, err
	}
	if task.Repo != nil {
		return e.runRepoRollout(ctx, agent, task, factory)
	}
	sb, err := factory.NewSandbox(ctx)
	if err != nil {
		e.metrics.count("env/sandbox_failures", 1)
		return Rollout{}, fmt.Errorf("%w: the rollout's sandbox: %w", ErrRolloutFailed, err)
	}
	defer sb.Close()
	if !task.HasTests() {
		return e.runAndScore(ctx, agent, task, sb, nil)
	}
	return e.runAndScore(ctx, agent, task, sb, func(ctx context.Context) (reward.Verification, error) {
		// The tests run in a fresh sandbox of the same factory, apart from the solution.
		return reward.Verify(ctx, sb, factory, task, reward.VerifyOptions{Timeout: e.cfg.VerifyTimeout})
	})
}

// runAndScore runs agent on task in sb, then, when the agent took a turn and verify is
// not nil, verifies the rollout with verify, and scores it: the one path of every
// rollout, function-level or repository task. A verification error fails the
// rollout ([ErrRolloutFailed]); a verification that blames the solution's own
// sandbox ([reward.Verification.SandboxFault]) is counted and scored.
func (e *Env) runAndScore(ctx context.Context, agent *rollout.Agent, task tasks.Task, sb rollout.Sandbox,
	verify func(context.Context) (reward.Verification, error)) (Rollout, error) {
	traj, stats, err := agent.RunStats(ctx, e.cfg.Prompt.Messages(task), sb)
	if err != nil {
		return Rollout{}, err
	}
	e.metrics.addStats(stats)
	if traj.Stop == rollout.StopPolicyError {
		e.metrics.count("env/policy_failures", 1)
		return Rollout{}, fmt.Errorf("%w: policy: %s", ErrRolloutFailed, traj.Err)
	}
	r := Rollout{Trajectory: traj, Stats: stats}
	if traj.TurnsUsed > 0 && verify != nil {
		r.Verification, err = verify(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return Rollout{}, ctx.Err()
			}
			e.metrics.count("env/sandbox_failures", 1)
			return Rollout{}, fmt.Errorf("%w: verification: %w", ErrRolloutFailed, err)
		}
		if r.Verification.SandboxFault {
			// The agent broke its own sandbox: scored as the solution's fault, the
			// group kept.
			e.metrics.count("env/solution_sandbox_faults", 1)
			e.cfg.Logger.Info("rollout scored as the solution's fault: its own sandbox failed",
				"task", task.ID, "metric", "env/solution_sandbox_faults", "reason", r.Verification.Reason)
		}
	}
	r.Reward, err = e.reward.Score(ctx, reward.Input{
		Messages:     traj.Messages,
		TurnsUsed:    traj.TurnsUsed,
		MaxTurns:     e.cfg.MaxTurns,
		Verification: r.Verification,
	})
	if err != nil {
		return Rollout{}, fmt.Errorf("reward: %w", err)
	}
	return r, nil
}

// attachRows gives data the teacher rows of res, sharing their arrays (atropos.FlatDistillRows).
func (e *Env) attachRows(data *atropos.ScoredDataGroup, res opd.Result) error {
	if len(res.Sequences) != data.Len() {
		return fmt.Errorf("opd returned %d sequences for %d", len(res.Sequences), data.Len())
	}
	data.Distill = make([]*atropos.DistillRows, data.Len())
	if e.cfg.TeacherLogprobsAsRef {
		data.RefLogprobs = make([][]float64, data.Len())
	}
	for s := range res.Sequences {
		rows := &res.Sequences[s].Rows
		n := len(data.Tokens[s])
		if rows.Len() != n {
			return fmt.Errorf("opd rows of sequence %d have %d positions for %d tokens", s, rows.Len(), n)
		}
		dr, err := atropos.FlatDistillRows(rows.Offsets, rows.IDs, rows.Logprobs)
		if err != nil {
			return fmt.Errorf("opd rows of sequence %d: %w", s, err)
		}
		data.Distill[s] = dr
		if e.cfg.TeacherLogprobsAsRef {
			ref := make([]float64, n)
			for p := range n {
				ref[p] = atropos.MaskedLogprob
				if rows.Scored(p) {
					ref[p] = float64(rows.TokenLogprobs[p])
				}
			}
			data.RefLogprobs[s] = ref
		}
	}
	return nil
}

// generationParams is what every policy request of a training group stated: the
// sampling fields under vLLM's names and max_tokens (per turn). Atropos's trainer
// reads its temperature.
func (e *Env) generationParams() map[string]any {
	m := e.cfg.policySampling().Map()
	m["max_tokens"] = e.cfg.MaxTokens
	return m
}

// promptTooLong reports whether a rollout of rs never got a turn because its prompt
// did not fit the policy's context.
func promptTooLong(rs []Rollout) bool {
	for _, r := range rs {
		if t := r.Trajectory; t.TurnsUsed == 0 && t.Stop == rollout.StopContextLength {
			return true
		}
	}
	return false
}

// firstStopDetail is the stop detail of the first rollout that has one.
func firstStopDetail(rs []Rollout) string {
	for _, r := range rs {
		if r.Trajectory.Err != "" {
			return r.Trajectory.Err
		}
	}
	return ""
}

func longest(g *atropos.ScoredDataGroup) int {
	n := 0
	for _, t := range g.Tokens {
		n = max(n, len(t))
	}
	return n
}

// Metrics returns the metrics accumulated since the Env was made: the reference's
// train/ and opd/ names, rollout/ boundary counts, requests/ per role and env/ counts.
func (e *Env) Metrics() map[string]float64 {
	m := e.metrics.snapshot()
	for k, v := range e.counts.snapshot() {
		m[k] = v
	}
	return m
}

// limitScorer lets at most sem's size calls of s run at once; a call waiting for its
// turn ends with ctx.
func limitScorer(s scorer.LogprobScorer, sem *semaphore.Weighted) scorer.LogprobScorer {
	return scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
		if err := sem.Acquire(ctx, 1); err != nil {
			return scorer.Result{}, err
		}
		defer sem.Release(1)
		return s.Score(ctx, req)
	})
}
