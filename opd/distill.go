package opd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

// Defaults of [Config].
const (
	DefaultTopK        = 50 // teacher entries per scored position
	DefaultConcurrency = 8  // Judge, Templater and Renderer calls in flight
)

// ErrInvalidConfig is wrapped by the errors of [New] for a configuration it cannot use.
var ErrInvalidConfig = errors.New("opd: invalid config")

// ErrInvalidTrajectory is wrapped by the errors of [Distiller.Distill] for a trajectory
// whose turns, messages and segments do not fit together.
var ErrInvalidTrajectory = errors.New("opd: invalid trajectory")

// Config configures a [Distiller]. The zero value of every optional field is its
// documented default.
type Config struct {
	// Judge finds the hints. Required.
	Judge judge.Judge
	// Teacher scores the teacher sequences: the policy server itself, or a frozen
	// teacher. Required.
	Teacher scorer.LogprobScorer
	// Templater gives a hint's tokens for Inline placement; required with Inline.
	Templater Templater
	// Renderer renders the enhanced context for TaskPrompt placement; required with
	// TaskPrompt.
	Renderer Renderer
	// Placement is where hints go; the zero value is [Inline].
	Placement Placement
	// TopK is the number of teacher entries per scored position; 0 means 50.
	TopK int
	// HintMaxNextStateChars cuts each next-state message shown to the judge; 0 means
	// 4000.
	HintMaxNextStateChars int
	// Concurrency bounds the Judge calls, and the Templater or Renderer calls, in flight
	// at once; 0 means 8.
	Concurrency int
	// MaxTeacherLen is the longest teacher sequence the teacher accepts (for vLLM, its
	// max_model_len minus the one token a scoring request generates); 0 means no limit.
	// Inline hints make a teacher sequence longer than the student's, so a rollout that
	// ran close to the context length could otherwise fail the whole teacher request.
	// A hinted turn whose teacher positions would pass the limit is left unscored with
	// [StatusTooLong] and counted; the turns before it are still scored.
	MaxTeacherLen int
	// Logger receives judge failures, template drift and alignment mismatches at warn
	// level and a summary per call at debug level; nil means no logging.
	Logger *slog.Logger
}

// Distiller turns trajectories into distillation rows: it finds the turn pairs, asks
// the judge for hints, builds the teacher sequences, scores them in one teacher request
// and places the teacher's rows at the student positions. It is safe for concurrent
// use.
type Distiller struct {
	cfg Config
}

// New returns a Distiller. It does no I/O.
func New(cfg Config) (*Distiller, error) {
	switch {
	case cfg.Judge == nil:
		return nil, fmt.Errorf("%w: Judge is required", ErrInvalidConfig)
	case cfg.Teacher == nil:
		return nil, fmt.Errorf("%w: Teacher is required", ErrInvalidConfig)
	case cfg.Placement == Inline && cfg.Templater == nil:
		return nil, fmt.Errorf("%w: Inline placement needs a Templater", ErrInvalidConfig)
	case cfg.Placement == TaskPrompt && cfg.Renderer == nil:
		return nil, fmt.Errorf("%w: TaskPrompt placement needs a Renderer", ErrInvalidConfig)
	case cfg.Placement != Inline && cfg.Placement != TaskPrompt:
		return nil, fmt.Errorf("%w: unknown %v", ErrInvalidConfig, cfg.Placement)
	case cfg.MaxTeacherLen < 0:
		return nil, fmt.Errorf("%w: MaxTeacherLen is %d, want ≥ 0 (0 means no limit)", ErrInvalidConfig, cfg.MaxTeacherLen)
	case cfg.TopK < 0:
		return nil, fmt.Errorf("%w: TopK is %d, want ≥ 0 (0 means %d)", ErrInvalidConfig, cfg.TopK, DefaultTopK)
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("%w: Concurrency is %d, want ≥ 0 (0 means %d)", ErrInvalidConfig, cfg.Concurrency, DefaultConcurrency)
	case cfg.HintMaxNextStateChars < 0:
		return nil, fmt.Errorf("%w: HintMaxNextStateChars is %d, want ≥ 0 (0 means %d)", ErrInvalidConfig, cfg.HintMaxNextStateChars, DefaultHintMaxNextStateChars)
	}
	if cfg.TopK == 0 {
		cfg.TopK = DefaultTopK
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.HintMaxNextStateChars == 0 {
		cfg.HintMaxNextStateChars = DefaultHintMaxNextStateChars
	}
	return &Distiller{cfg: cfg}, nil
}

// Result is what Distill found for a group.
type Result struct {
	// Sequences has one entry per input trajectory, in order.
	Sequences []Sequence
	// Metrics counts what happened to the group's turn pairs.
	Metrics Metrics
}

// Sequence is the outcome for one trajectory.
type Sequence struct {
	// Rows has one row per token of the trajectory; see [Rows].
	Rows Rows
	// Turns has one entry per turn pair, in message order.
	Turns []TurnResult
}

// Hints returns the hints given for the trajectory's turns, in order: the hint texts
// that are not only white space, as Distill counts hints.
func (s *Sequence) Hints() []string {
	var out []string
	for _, t := range s.Turns {
		if judge.Strip(t.Hint.Text) != "" {
			out = append(out, t.Hint.Text)
		}
	}
	return out
}

// TurnResult is the outcome for one turn pair.
type TurnResult struct {
	// Message is the index of the assistant message; Turn the index of its turn in
	// [rollout.Trajectory.Turns], or -1.
	Message, Turn int
	// Hint is the judge's verdict (empty when the pair was not judged).
	Hint judge.Hint
	// Status says whether the pair was scored, and if not why.
	Status TurnStatus
	// Detail says what went wrong for StatusJudgeFailed, StatusTemplateDrift,
	// StatusMismatch and StatusTooLong.
	Detail string
}

// TurnStatus says what became of a turn pair.
type TurnStatus string

// Turn statuses.
const (
	// StatusNoSpan: no generated span is recorded for the message; not judged.
	StatusNoSpan TurnStatus = "no_span"
	// StatusJudgeFailed: the judge returned an error; no hint.
	StatusJudgeFailed TurnStatus = "judge_failed"
	// StatusNoHint: the judge gave no hint.
	StatusNoHint TurnStatus = "no_hint"
	// StatusTemplateDrift: the hint could not be rendered exactly; unscored.
	StatusTemplateDrift TurnStatus = "template_drift"
	// StatusMismatch: the alignment check failed (a scored position does not hold the
	// student's sampled token, or, with Inline, the turn's generation prompt is not a
	// recorded generation-prompt segment, so the hint has no safe insertion point);
	// unscored.
	StatusMismatch TurnStatus = "alignment_mismatch"
	// StatusTooLong: the turn's teacher positions would pass Config.MaxTeacherLen;
	// unscored.
	StatusTooLong TurnStatus = "teacher_too_long"
	// StatusScored: the turn's whole generated span got teacher rows.
	StatusScored TurnStatus = "scored"
)

// work is one judged turn pair on its way to the teacher.
type work struct {
	seq    int // trajectory index
	res    *TurnResult
	pair   Pair
	tokens []int32 // Inline: the hint's tokens; TaskPrompt: the rendered prompt
}

// Distill finds hints for the turns of trajs and scores every hinted turn with the
// teacher, in one Score call for the whole group. It returns one [Sequence] per
// trajectory and the call's metrics.
//
// Judge failures never fail the call: the turn gets no hint and the failure is
// counted. Errors: ctx's; [ErrInvalidTrajectory]; a Templater or Renderer failure other
// than template drift; a teacher failure or a teacher result that does not answer the
// request. On error no sequence is returned; after a teacher failure the result's
// Metrics still count the request that was sent (TeacherRequests, TeacherSequences,
// TeacherPromptTokens), so that a refused request is not a request never made.
func (d *Distiller) Distill(ctx context.Context, trajs []*rollout.Trajectory) (Result, error) {
	for i, t := range trajs {
		if err := validate(t); err != nil {
			return Result{}, fmt.Errorf("%w %d: %v", ErrInvalidTrajectory, i, err)
		}
	}
	res := Result{Sequences: make([]Sequence, len(trajs))}
	var todo []*work
	for i, t := range trajs {
		seq := &res.Sequences[i]
		seq.Rows = emptyRows(len(t.Tokens))
		pairs := TrajectoryPairs(t, d.cfg.HintMaxNextStateChars)
		seq.Turns = make([]TurnResult, len(pairs))
		for j, p := range pairs {
			seq.Turns[j] = TurnResult{Message: p.Message, Turn: p.TurnIndex}
			if p.TurnIndex < 0 || t.Turns[p.TurnIndex].Start == t.Turns[p.TurnIndex].End {
				seq.Turns[j].Status = StatusNoSpan
				continue
			}
			todo = append(todo, &work{seq: i, res: &seq.Turns[j], pair: p})
		}
	}
	if err := d.judgeAll(ctx, todo); err != nil {
		return Result{}, err
	}
	hinted := todo[:0]
	for _, w := range todo {
		if w.res.Status == "" {
			hinted = append(hinted, w)
		}
	}
	if err := d.hintTokens(ctx, trajs, hinted); err != nil {
		return Result{}, err
	}
	req, plans := d.build(ctx, trajs, hinted)
	if err := d.score(ctx, req, plans, &res); err != nil {
		return Result{Metrics: sent(req)}, err
	}
	res.Metrics = d.count(&res, req)
	if l := d.cfg.Logger; l != nil {
		l.DebugContext(ctx, "opd: distilled group", "rollouts", len(trajs), "pairs", res.Metrics.Pairs,
			"hints", res.Metrics.Hints, "scored_turns", res.Metrics.ScoredTurns,
			"teacher_sequences", res.Metrics.TeacherSequences, "teacher_prompt_tokens", res.Metrics.TeacherPromptTokens)
	}
	return res, nil
}

// judgeAll asks the judge about every pair in todo, Concurrency at a time. A pair
// without a hint gets its final status; a hinted pair keeps an empty status.
func (d *Distiller) judgeAll(ctx context.Context, todo []*work) error {
	var g errgroup.Group
	g.SetLimit(d.cfg.Concurrency)
	for _, w := range todo {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			h, err := d.cfg.Judge.Judge(ctx, w.pair.Turn)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.res.Status, w.res.Detail = StatusJudgeFailed, err.Error()
				d.warn(ctx, "opd: judge failed; the turn gets no hint", w, err)
				return nil
			}
			w.res.Hint = h
			if judge.Strip(h.Text) == "" {
				w.res.Status = StatusNoHint
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// hintTokens fills w.tokens for every hinted turn: the hint's template delta (Inline)
// or the rendered enhanced context (TaskPrompt). Template drift marks the turn.
func (d *Distiller) hintTokens(ctx context.Context, trajs []*rollout.Trajectory, hinted []*work) error {
	var g errgroup.Group
	g.SetLimit(d.cfg.Concurrency)
	for _, w := range hinted {
		g.Go(func() error {
			t := trajs[w.seq]
			var toks []int32
			var err error
			if d.cfg.Placement == Inline {
				toks, err = d.cfg.Templater.Delta(ctx, []chat.Message{HintMessage(w.res.Hint.Text)}, false)
				if err == nil && len(toks) == 0 {
					err = &rollout.DriftError{Check: "shape", Detail: "empty hint delta"}
				}
			} else {
				var r rollout.Rendered
				r, err = d.cfg.Renderer.Render(ctx, AppendHint(renderable(t, w.pair.Message), w.res.Hint.Text), true)
				toks = r.Tokens
				turn := t.Turns[w.pair.TurnIndex]
				if err == nil && !hasSuffix(toks, t.Tokens[turn.GenPromptStart:turn.Start]) {
					err = &rollout.DriftError{Check: "generation prompt",
						Detail: "the render of the enhanced context does not end with the student's generation prompt"}
				}
				if err == nil && len(toks) == 0 {
					err = &rollout.DriftError{Check: "shape", Detail: "empty render"}
				}
			}
			switch {
			case err == nil:
				w.tokens = toks
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, rollout.ErrTemplateDrift), errors.Is(err, rollout.ErrRoleUnsupported):
				w.res.Status, w.res.Detail = StatusTemplateDrift, err.Error()
				d.warn(ctx, "opd: hint template drift; the turn is left unscored", w, err)
			default:
				return fmt.Errorf("opd: %v hint for trajectory %d message %d: %w", d.cfg.Placement, w.seq, w.pair.Message, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (d *Distiller) warn(ctx context.Context, msg string, w *work, err error) {
	if d.cfg.Logger != nil {
		d.cfg.Logger.WarnContext(ctx, msg, "trajectory", w.seq, "message", w.pair.Message, "err", err)
	}
}

func hasSuffix(s, suffix []int32) bool {
	return len(s) >= len(suffix) && equal(s[len(s)-len(suffix):], suffix)
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
