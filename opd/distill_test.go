package opd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

const topK = 4

var hintFor = map[string]string{
	"AssertionError: fizzbuzz(15) returned []": "Handle multiples of 15 before multiples of 3 and 5.",
	"All tests passed!":                        "Report success only after running the tests once more.",
	"NameError: name 'x' is not defined":       "Define x before using it in the loop.",
}

// scriptedJudge hints when the next state is one of hintFor's keys and counts calls.
func scriptedJudge(calls *atomic.Int64) judge.Judge {
	return judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		calls.Add(1)
		if err := ctx.Err(); err != nil {
			return judge.Hint{}, err
		}
		if h, ok := hintFor[turn.NextState]; ok {
			return judge.Hint{Text: h, Votes: []judge.Vote{{Score: 1, Hint: h}}}, nil
		}
		return judge.Hint{Votes: []judge.Vote{{Score: -1}, {Unparsed: judge.UnparsedNoDecision}}}, nil
	})
}

// group returns three trajectories: A with four turn pairs, two of them hinted (turns 1
// and 3, both tool-call-only); B with one hinted pair; C with no pair.
func group() []*rollout.Trajectory {
	a := newTraj(system("You are a skilled Python programmer."), user("Write fizzbuzz(n).")).
		assistant(asst("I'll write it.", toolCall("write_file", `{"path":"solution.py","content":"v1"}`)...)).
		then(tool("written")).
		assistant(asst("", toolCall("terminal", `{"command":"python test_solution.py"}`)...)).
		then(tool("AssertionError: fizzbuzz(15) returned []")).
		assistant(asst("Fixing.", toolCall("write_file", `{"path":"solution.py","content":"v2"}`)...)).
		then(tool("written")).
		assistant(asst("", toolCall("terminal", `{"command":"python test_solution.py"}`)...)).
		then(tool("All tests passed!")).
		assistant(asst("Done.")).
		build()
	b := newTraj(user("Write flatten(lst).")).
		assistant(asst("Running.", toolCall("terminal", `{"command":"python x.py"}`)...)).
		then(tool("NameError: name 'x' is not defined")).
		assistant(asst("Done.")).
		build()
	c := newTraj(user("Say hi.")).assistant(asst("Hi.")).build()
	return []*rollout.Trajectory{a, b, c}
}

func newDistiller(t *testing.T, cfg opd.Config) *opd.Distiller {
	t.Helper()
	d, err := opd.New(cfg)
	require.NoError(t, err)
	return d
}

// wantRows lays out, by hand, the rows a scored span gets: student position
// start+j carries the fake teacher's row at teacher position tstart+j of teacher.
type scoredSpan struct {
	start, end int
	teacher    []int32
	tstart     int
}

func requireRows(t *testing.T, n int, spans []scoredSpan, got opd.Rows) {
	t.Helper()
	require.Equal(t, n, got.Len())
	rowAt := map[int][2]any{}
	tokAt := map[int]float32{}
	for _, s := range spans {
		for j := range s.end - s.start {
			ids, lps, tok := teacherRow(s.teacher, s.tstart+j, topK)
			rowAt[s.start+j] = [2]any{ids, lps}
			tokAt[s.start+j] = tok
		}
	}
	for p := range n {
		ids, lps := got.Row(p)
		want, ok := rowAt[p]
		if !ok {
			require.Falsef(t, got.Scored(p), "position %d has a row %v but was not scored", p, ids)
			continue
		}
		require.Truef(t, got.Scored(p), "position %d has no row", p)
		if diff := cmp.Diff(want, [2]any{ids, lps}); diff != "" {
			t.Fatalf("row at student position %d (-want +got):\n%s", p, diff)
		}
		require.Equal(t, tokAt[p], got.TokenLogprobs[p], "token logprob at %d", p)
	}
}

func TestDistillInline(t *testing.T) {
	trajs := group()
	var judgeCalls atomic.Int64
	tmpl := &fakeTemplate{}
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&judgeCalls), Teacher: teacher.scorer(), Templater: tmpl, TopK: topK})

	res, err := d.Distill(context.Background(), trajs)
	require.NoError(t, err)

	require.EqualValues(t, 5, judgeCalls.Load(), "one judge call per turn pair")
	require.Len(t, teacher.reqs, 1, "one Score call for the whole group")
	req := teacher.reqs[0]
	require.Equal(t, topK, req.K)
	require.Len(t, req.Sequences, 2, "one teacher sequence per hinted rollout")

	// Rollout A: hints before turns 1 and 3, inserted at their generation prompts.
	a := trajs[0]
	h1 := render([]chat.Message{opd.HintMessage(hintFor["AssertionError: fizzbuzz(15) returned []"])}, false)
	h3 := render([]chat.Message{opd.HintMessage(hintFor["All tests passed!"])}, false)
	t1, t3 := a.Turns[1], a.Turns[3]
	var wantA []int32
	wantA = append(wantA, a.Tokens[:t1.GenPromptStart]...)
	wantA = append(wantA, h1...)
	wantA = append(wantA, a.Tokens[t1.GenPromptStart:t3.GenPromptStart]...)
	wantA = append(wantA, h3...)
	wantA = append(wantA, a.Tokens[t3.GenPromptStart:t3.End]...)
	var wantPosA []int
	for p := t1.Start; p < t1.End; p++ {
		wantPosA = append(wantPosA, p+len(h1))
	}
	for p := t3.Start; p < t3.End; p++ {
		wantPosA = append(wantPosA, p+len(h1)+len(h3))
	}
	if diff := cmp.Diff(scorer.Sequence{Tokens: wantA, Positions: wantPosA}, req.Sequences[0]); diff != "" {
		t.Errorf("teacher sequence of A (-want +got):\n%s", diff)
	}
	requireRows(t, len(a.Tokens), []scoredSpan{
		{t1.Start, t1.End, wantA, t1.Start + len(h1)},
		{t3.Start, t3.End, wantA, t3.Start + len(h1) + len(h3)},
	}, res.Sequences[0].Rows)

	// Rollout B: one hint.
	b := trajs[1]
	hb := render([]chat.Message{opd.HintMessage(hintFor["NameError: name 'x' is not defined"])}, false)
	tb := b.Turns[0]
	wantB := append(append(append([]int32{}, b.Tokens[:tb.GenPromptStart]...), hb...), b.Tokens[tb.GenPromptStart:tb.End]...)
	require.Equal(t, wantB, req.Sequences[1].Tokens)
	requireRows(t, len(b.Tokens), []scoredSpan{{tb.Start, tb.End, wantB, tb.Start + len(hb)}}, res.Sequences[1].Rows)

	// Rollout C: no pair, no rows.
	requireRows(t, len(trajs[2].Tokens), nil, res.Sequences[2].Rows)
	require.Empty(t, res.Sequences[2].Turns)

	// The templater was asked for exactly the hint messages, without the generation prompt.
	require.Len(t, tmpl.deltas, 3)
	for _, msgs := range tmpl.deltas {
		require.Len(t, msgs, 1)
		require.True(t, strings.HasPrefix(msgs[0].Content, opd.HintMarker+"\n"))
	}

	var statuses []opd.TurnStatus
	for _, tr := range res.Sequences[0].Turns {
		statuses = append(statuses, tr.Status)
	}
	require.Equal(t, []opd.TurnStatus{opd.StatusNoHint, opd.StatusScored, opd.StatusNoHint, opd.StatusScored}, statuses)
	require.Equal(t, []string{hintFor["AssertionError: fizzbuzz(15) returned []"], hintFor["All tests passed!"]}, res.Sequences[0].Hints())

	wantMetrics := opd.Metrics{
		Rollouts: 2, RolloutsWithHint: 2, Hints: 3, ScoredTurns: 3,
		Pairs: 5, JudgeCalls: 5, Votes: 7, UnparsedVotes: 2,
		UnparsedByReason: map[string]int{judge.UnparsedNoDecision: 2},
		TeacherRequests:  1, TeacherSequences: 2,
		TeacherPromptTokens: len(wantA) + len(wantB),
		TeacherPositions:    len(wantPosA) + tb.End - tb.Start,
	}
	if diff := cmp.Diff(wantMetrics, res.Metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// TaskPrompt's rows equal the reference's placement computed by hand: render the
// context with the hint appended to the last user message, with the generation
// prompt, then the student's own ids of the turn.
func TestDistillTaskPrompt(t *testing.T) {
	trajs := group()
	var judgeCalls atomic.Int64
	tmpl := &fakeTemplate{}
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&judgeCalls), Teacher: teacher.scorer(),
		Renderer: tmpl, Placement: opd.TaskPrompt, TopK: topK})

	res, err := d.Distill(context.Background(), trajs)
	require.NoError(t, err)
	require.Len(t, teacher.reqs, 1, "one Score call for the whole group")
	req := teacher.reqs[0]
	require.Len(t, req.Sequences, 3, "one teacher sequence per hinted turn")

	hinted := []struct {
		traj, turn int
		next       string
	}{{0, 1, "AssertionError: fizzbuzz(15) returned []"}, {0, 3, "All tests passed!"}, {1, 0, "NameError: name 'x' is not defined"}}
	spans := map[int][]scoredSpan{}
	for i, h := range hinted {
		tr := trajs[h.traj]
		turn := tr.Turns[h.turn]
		// By hand: the last user message before the turn is the task prompt.
		ctxMsgs := chat.Clone(tr.Messages[:turn.Message])
		for j := len(ctxMsgs) - 1; j >= 0; j-- {
			if ctxMsgs[j].Role == chat.RoleUser {
				ctxMsgs[j].Content = strings.TrimSpace(ctxMsgs[j].Content + "\n\n[user's hint / instruction]\n" + hintFor[h.next])
				break
			}
		}
		prompt := render(ctxMsgs, true)
		want := append(append([]int32{}, prompt...), tr.Tokens[turn.Start:turn.End]...)
		var pos []int
		for p := range turn.End - turn.Start {
			pos = append(pos, len(prompt)+p)
		}
		if diff := cmp.Diff(scorer.Sequence{Tokens: want, Positions: pos}, req.Sequences[i]); diff != "" {
			t.Errorf("teacher sequence %d (-want +got):\n%s", i, diff)
		}
		spans[h.traj] = append(spans[h.traj], scoredSpan{turn.Start, turn.End, want, len(prompt)})
	}
	for i, tr := range trajs {
		requireRows(t, len(tr.Tokens), spans[i], res.Sequences[i].Rows)
	}
	require.Len(t, tmpl.renders, 3)
	require.Equal(t, 3, res.Metrics.ScoredTurns)
	require.Equal(t, 3, res.Metrics.TeacherSequences)
}

func TestDistillAlignmentMismatch(t *testing.T) {
	trajs := group()[:1]
	// Stretch turn 1's span over the separator the template wrote after it: that
	// position was not sampled, so the turn must be left unscored, not shifted.
	trajs[0].Turns[1].End++
	var calls atomic.Int64
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK})
	res, err := d.Distill(context.Background(), trajs)
	require.NoError(t, err)

	turns := res.Sequences[0].Turns
	require.Equal(t, opd.StatusMismatch, turns[1].Status)
	require.Contains(t, turns[1].Detail, "not a sampled token")
	require.Equal(t, opd.StatusScored, turns[3].Status)
	require.Equal(t, 1, res.Metrics.AlignmentMismatches)
	require.Equal(t, 1, res.Metrics.ScoredTurns)
	require.Equal(t, 2, res.Metrics.Hints)

	a := trajs[0]
	t1, t3 := a.Turns[1], a.Turns[3]
	for p := t1.Start; p < t1.End; p++ {
		require.False(t, res.Sequences[0].Rows.Scored(p), "position %d of the mismatched turn", p)
	}
	// Turn 3's teacher positions still count both hints, since both were inserted.
	h1 := render([]chat.Message{opd.HintMessage(hintFor["AssertionError: fizzbuzz(15) returned []"])}, false)
	h3 := render([]chat.Message{opd.HintMessage(hintFor["All tests passed!"])}, false)
	require.Equal(t, t3.Start+len(h1)+len(h3), teacher.reqs[0].Sequences[0].Positions[0])
	ids, _ := res.Sequences[0].Rows.Row(t3.Start)
	require.Equal(t, a.Tokens[t3.Start], ids[0])
}

func TestDistillJudgeFailuresDoNotLoseTheGroup(t *testing.T) {
	var calls atomic.Int64
	inner := scriptedJudge(&calls)
	j := judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		if turn.NextState == "NameError: name 'x' is not defined" {
			return judge.Hint{}, fmt.Errorf("judge model unreachable: %w", errBoom)
		}
		return inner.Judge(ctx, turn)
	})
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: j, Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK})
	res, err := d.Distill(context.Background(), group())
	require.NoError(t, err)
	require.Equal(t, opd.StatusJudgeFailed, res.Sequences[1].Turns[0].Status)
	require.Contains(t, res.Sequences[1].Turns[0].Detail, "unreachable")
	require.Equal(t, 1, res.Metrics.JudgeErrors)
	require.Equal(t, 2, res.Metrics.ScoredTurns)
	require.Equal(t, 0, res.Sequences[1].Rows.ScoredPositions())
}

func TestDistillErrors(t *testing.T) {
	var calls atomic.Int64
	ok := scriptedJudge(&calls)
	tests := []struct {
		name    string
		ctx     func() context.Context
		cfg     func(*opd.Config)
		trajs   func() []*rollout.Trajectory
		wantErr error
		wantMsg string
	}{
		{
			name: "cancelled context",
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			wantErr: context.Canceled,
		},
		{
			name:    "teacher error",
			cfg:     func(c *opd.Config) { c.Teacher = (&fakeTeacher{err: errBoom}).scorer() },
			wantErr: errBoom,
			wantMsg: "opd: teacher",
		},
		{
			name: "teacher answer with missing sequences",
			cfg: func(c *opd.Config) {
				c.Teacher = scorer.Func(func(context.Context, scorer.Request) (scorer.Result, error) { return scorer.Result{}, nil })
			},
			wantMsg: "does not match its request",
		},
		{
			name:    "templater failure other than drift",
			cfg:     func(c *opd.Config) { c.Templater = &fakeTemplate{fail: errBoom} },
			wantErr: errBoom,
			wantMsg: "inline hint for trajectory",
		},
		{
			name:    "nil trajectory",
			trajs:   func() []*rollout.Trajectory { return []*rollout.Trajectory{nil} },
			wantErr: opd.ErrInvalidTrajectory,
		},
		{
			name: "turn past the tokens",
			trajs: func() []*rollout.Trajectory {
				g := group()
				g[1].Turns[1].End = len(g[1].Tokens) + 1
				return g
			},
			wantErr: opd.ErrInvalidTrajectory,
			wantMsg: "trajectory 1: turn 1",
		},
		{
			name: "turn on a tool message",
			trajs: func() []*rollout.Trajectory {
				g := group()
				g[0].Turns[0].Message = 3
				return g
			},
			wantErr: opd.ErrInvalidTrajectory,
			wantMsg: `role "tool"`,
		},
		{
			name: "overlapping turns",
			trajs: func() []*rollout.Trajectory {
				g := group()
				g[0].Turns[1].GenPromptStart = g[0].Turns[0].End - 1
				return g
			},
			wantErr: opd.ErrInvalidTrajectory,
		},
		{
			name: "segment past the tokens",
			trajs: func() []*rollout.Trajectory {
				g := group()
				g[2].Segments[0].End = 1 << 20
				return g
			},
			wantErr: opd.ErrInvalidTrajectory,
			wantMsg: "segment 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := opd.Config{Judge: ok, Teacher: (&fakeTeacher{}).scorer(), Templater: &fakeTemplate{}, TopK: topK}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			trajs := group()
			if tt.trajs != nil {
				trajs = tt.trajs()
			}
			res, err := newDistiller(t, cfg).Distill(ctx, trajs)
			require.Error(t, err)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			}
			require.Contains(t, err.Error(), tt.wantMsg)
			require.Empty(t, res.Sequences, "no partial result with an error")
		})
	}
}

func TestDistillTemplateDrift(t *testing.T) {
	tests := []struct {
		name string
		cfg  opd.Config
	}{
		{"inline delta drift", opd.Config{Templater: &fakeTemplate{fail: &rollout.DriftError{Check: "prefix", Detail: "x"}}}},
		{"inline role unsupported", opd.Config{Templater: &fakeTemplate{fail: fmt.Errorf("%w: user", rollout.ErrRoleUnsupported)}}},
		{"task prompt without the student's generation prompt", opd.Config{Placement: opd.TaskPrompt, Renderer: noGenRenderer{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			teacher := &fakeTeacher{}
			cfg := tt.cfg
			cfg.Judge, cfg.Teacher, cfg.TopK = scriptedJudge(&calls), teacher.scorer(), topK
			res, err := newDistiller(t, cfg).Distill(context.Background(), group())
			require.NoError(t, err)
			require.Equal(t, 3, res.Metrics.TemplateDrift)
			require.Equal(t, 3, res.Metrics.Hints)
			require.Zero(t, res.Metrics.ScoredTurns)
			require.Empty(t, teacher.reqs, "nothing to score, no teacher request")
			require.Equal(t, opd.StatusTemplateDrift, res.Sequences[0].Turns[1].Status)
		})
	}
}

// noGenRenderer ignores addGenerationPrompt.
type noGenRenderer struct{}

func (noGenRenderer) Render(_ context.Context, msgs []chat.Message, _ bool) (rollout.Rendered, error) {
	return rollout.Rendered{Tokens: render(msgs, false)}, nil
}

func TestNewErrors(t *testing.T) {
	var calls atomic.Int64
	j, s, tm := scriptedJudge(&calls), (&fakeTeacher{}).scorer(), &fakeTemplate{}
	tests := []struct {
		name string
		cfg  opd.Config
	}{
		{"no judge", opd.Config{Teacher: s, Templater: tm}},
		{"no teacher", opd.Config{Judge: j, Templater: tm}},
		{"inline without templater", opd.Config{Judge: j, Teacher: s, Renderer: tm}},
		{"task prompt without renderer", opd.Config{Judge: j, Teacher: s, Templater: tm, Placement: opd.TaskPrompt}},
		{"unknown placement", opd.Config{Judge: j, Teacher: s, Templater: tm, Renderer: tm, Placement: 9}},
		{"negative top-k", opd.Config{Judge: j, Teacher: s, Templater: tm, TopK: -1}},
		{"negative concurrency", opd.Config{Judge: j, Teacher: s, Templater: tm, Concurrency: -1}},
		{"negative cut", opd.Config{Judge: j, Teacher: s, Templater: tm, HintMaxNextStateChars: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := opd.New(tt.cfg)
			require.ErrorIs(t, err, opd.ErrInvalidConfig)
		})
	}
}

func TestDistillDefaultTopK(t *testing.T) {
	var calls atomic.Int64
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}})
	_, err := d.Distill(context.Background(), group())
	require.NoError(t, err)
	require.Equal(t, 50, teacher.reqs[0].K)
}

func TestDistillNothingToDo(t *testing.T) {
	var calls atomic.Int64
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}})
	res, err := d.Distill(context.Background(), group()[2:])
	require.NoError(t, err)
	require.Empty(t, teacher.reqs)
	require.Zero(t, calls.Load())
	require.Equal(t, map[string]float64{
		"opd/turn_pairs": 0, "opd/no_span_pairs": 0, "opd/judge_calls": 0, "opd/judge_errors": 0,
		"opd/judge_votes": 0, "opd/unparsable_votes": 0, "opd/alignment_mismatches": 0,
		"opd/template_drift": 0, "opd/teacher_requests": 0, "opd/teacher_sequences": 0, "opd/teacher_too_long": 0,
		"opd/teacher_prompt_tokens": 0, "opd/teacher_positions": 0,
	}, res.Metrics.Map(), "the reference's means appear only once a rollout had a pair")
}

// A hint goes only where the trajectory records the turn's generation prompt: a turn
// whose GenPromptStart does not open a generation-prompt segment ending at its Start is
// left unscored, and its hint is not inserted, so later turns do not see it either.
func TestDistillInlineBoundary(t *testing.T) {
	tests := []struct {
		name  string
		shift func(*rollout.Turn)
	}{
		{"insertion point inside the tool result", func(tr *rollout.Turn) { tr.GenPromptStart-- }},
		{"insertion point inside the generation prompt", func(tr *rollout.Turn) { tr.GenPromptStart++ }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trajs := group()
			a := trajs[0]
			tt.shift(&a.Turns[1])
			var calls atomic.Int64
			teacher := &fakeTeacher{}
			d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK})
			res, err := d.Distill(context.Background(), trajs)
			require.NoError(t, err)

			turns := res.Sequences[0].Turns
			require.Equal(t, opd.StatusMismatch, turns[1].Status)
			require.Contains(t, turns[1].Detail, "not a recorded generation prompt")
			require.Equal(t, opd.StatusScored, turns[3].Status)
			require.Equal(t, 1, res.Metrics.AlignmentMismatches)
			require.Equal(t, 2, res.Metrics.ScoredTurns)

			// Rollout A's teacher sequence holds only turn 3's hint.
			t3 := a.Turns[3]
			h3 := render([]chat.Message{opd.HintMessage(hintFor["All tests passed!"])}, false)
			want := append(append(append([]int32{}, a.Tokens[:t3.GenPromptStart]...), h3...), a.Tokens[t3.GenPromptStart:t3.End]...)
			require.Equal(t, want, teacher.reqs[0].Sequences[0].Tokens)
			for p := a.Turns[1].Start; p < a.Turns[1].End; p++ {
				require.False(t, res.Sequences[0].Rows.Scored(p), "position %d of the turn without a safe insertion point", p)
			}
			requireRows(t, len(a.Tokens), []scoredSpan{{t3.Start, t3.End, want, t3.Start + len(h3)}}, res.Sequences[0].Rows)
		})
	}
}

// A judge's white-space-only hint text is no hint: the turn is not scored, and neither
// the metrics nor Sequence.Hints count it.
func TestDistillWhiteSpaceHintIsNoHint(t *testing.T) {
	blank := judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
		return judge.Hint{Text: " \n\t", Votes: []judge.Vote{{Score: 1, Hint: " \n\t"}}}, ctx.Err()
	})
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: blank, Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK})
	res, err := d.Distill(context.Background(), group())
	require.NoError(t, err)
	require.Zero(t, res.Metrics.Hints)
	require.Empty(t, teacher.reqs)
	for i, s := range res.Sequences {
		require.Empty(t, s.Hints(), "sequence %d", i)
		for _, tr := range s.Turns {
			require.Equal(t, opd.StatusNoHint, tr.Status)
		}
	}
}

func TestDistillBoundsJudgeCalls(t *testing.T) {
	var inFlight, most, calls atomic.Int64
	j := judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		calls.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // give the other calls a chance to overlap
		return judge.Hint{}, ctx.Err()
	})
	d := newDistiller(t, opd.Config{Judge: j, Teacher: (&fakeTeacher{}).scorer(), Templater: &fakeTemplate{}, TopK: topK, Concurrency: 2})
	_, err := d.Distill(context.Background(), group())
	require.NoError(t, err)
	require.EqualValues(t, 5, calls.Load())
	require.LessOrEqual(t, most.Load(), int64(2), "judge calls in flight at once")
}

// Cancelling ctx while judge calls are in flight stops the call with ctx's error: no
// turn is counted as a judge failure and nothing reaches the teacher.
func TestDistillCancelledWhileJudging(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Int64
	j := judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
		if started.Add(1) == 1 {
			cancel()
		}
		<-ctx.Done()
		return judge.Hint{}, fmt.Errorf("judge: %w", ctx.Err())
	})
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: j, Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK})
	res, err := d.Distill(ctx, group())
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, res.Sequences)
	require.Empty(t, teacher.reqs)
}

// A teacher sequence longer than MaxTeacherLen would fail the whole teacher request:
// the turns that would pass the limit are left unscored and counted, the turns before
// them are still scored, and the request stays within the limit.
func TestDistillMaxTeacherLen(t *testing.T) {
	trajs := group()
	a := trajs[0]
	h1 := render([]chat.Message{opd.HintMessage(hintFor["AssertionError: fizzbuzz(15) returned []"])}, false)
	t1 := a.Turns[1]
	limit := t1.End + len(h1) // rollout A's first hinted turn fits exactly, its second does not
	teacher := &fakeTeacher{}
	var calls atomic.Int64
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}, TopK: topK, MaxTeacherLen: limit})
	res, err := d.Distill(context.Background(), trajs)
	require.NoError(t, err)

	var statuses []opd.TurnStatus
	for _, tr := range res.Sequences[0].Turns {
		statuses = append(statuses, tr.Status)
	}
	require.Equal(t, []opd.TurnStatus{opd.StatusNoHint, opd.StatusScored, opd.StatusNoHint, opd.StatusTooLong}, statuses)
	require.Len(t, teacher.reqs, 1)
	for _, s := range teacher.reqs[0].Sequences {
		require.LessOrEqual(t, len(s.Tokens), limit)
	}
	requireRows(t, len(a.Tokens), []scoredSpan{{t1.Start, t1.End, teacher.reqs[0].Sequences[0].Tokens, t1.Start + len(h1)}}, res.Sequences[0].Rows)
	require.Equal(t, 1, res.Metrics.TeacherTooLong)
	require.Equal(t, float64(1), res.Metrics.Map()["opd/teacher_too_long"])

	_, err = opd.New(opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: &fakeTemplate{}, MaxTeacherLen: -1})
	require.ErrorIs(t, err, opd.ErrInvalidConfig)
}

// strictTemplate renders like fakeTemplate but, as vLLM does, refuses a conversation
// with tool-call arguments that are not JSON.
type strictTemplate struct{ fakeTemplate }

func (f *strictTemplate) Render(ctx context.Context, msgs []chat.Message, gen bool) (rollout.Rendered, error) {
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			if !json.Valid([]byte(tc.Function.Arguments)) {
				return rollout.Rendered{}, fmt.Errorf("messages[%d]: arguments are not valid JSON", i)
			}
		}
	}
	return f.fakeTemplate.Render(ctx, msgs, gen)
}

// A tool call the agent could not parse keeps the text the model wrote as its
// arguments. TaskPrompt renders the context before each hinted turn; the broken call
// must reach the teacher as the text the model wrote, a call marked invalid whose
// text happens to be a JSON object must not be rendered as a call either, and the
// readable call between them stays where the model wrote it.
func TestDistillTaskPromptRendersUnparsableCallsAsText(t *testing.T) {
	const broken = "\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"\n"
	const noName = `{"arguments": {"command": "ls"}}`
	b := newTraj(user("Write flatten(lst).")).
		assistant(asst("Looking.", []chat.ToolCall{
			{ID: "call_0_0", Type: "function", Function: chat.FunctionCall{Arguments: broken}},
			{ID: "call_0_1", Type: "function", Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}},
			{ID: "call_0_2", Type: "function", Function: chat.FunctionCall{Arguments: noName}},
		}...))
	b.t.Turns[0].InvalidCalls = []int{0, 2}
	traj := b.then(tool("invalid tool call"), tool("x.py"), tool("invalid tool call")).
		assistant(asst("Running.", toolCall("terminal", `{"command":"python x.py"}`)...)).
		then(tool("NameError: name 'x' is not defined")).
		assistant(asst("Done.")).
		build()
	before := chat.Clone(traj.Messages)

	var calls atomic.Int64
	tmpl := &strictTemplate{}
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(),
		Renderer: tmpl, Placement: opd.TaskPrompt, TopK: topK})
	res, err := d.Distill(context.Background(), []*rollout.Trajectory{traj})
	require.NoError(t, err)
	require.Equal(t, 1, res.Metrics.ScoredTurns, "turns: %+v", res.Sequences[0].Turns)
	require.Len(t, tmpl.renders, 1)

	want := chat.Clone(traj.Messages[:5])
	want[0].Content += "\n\n[user's hint / instruction]\n" + hintFor["NameError: name 'x' is not defined"]
	want[1].Content = "Looking.\n<tool_call>" + broken + "</tool_call>\n" +
		"<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n" +
		"<tool_call>" + noName + "</tool_call>"
	want[1].ToolCalls = nil
	if diff := cmp.Diff(want, tmpl.renders[0]); diff != "" {
		t.Errorf("rendered context (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, traj.Messages); diff != "" {
		t.Errorf("the trajectory's messages changed (-before +after):\n%s", diff)
	}
}

// A trajectory built by other means may carry calls no parser marked invalid whose
// arguments a server cannot render (not JSON, or JSON that is not an object). Such a
// message is written whole as text, in order: each readable call as the template
// writes a call (a JSON string holding an object unwrapped, ", " and ": " between
// members, string escapes kept), each unrenderable one with its arguments verbatim and
// its name kept. A message whose calls all render stays structured.
func TestDistillTaskPromptWritesUnrenderableArgumentsInOrder(t *testing.T) {
	call := func(id, name, args string) chat.ToolCall {
		return chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name  string
		calls []chat.ToolCall
		want  string // the message's content; "" means it stays as it is
	}{
		{
			name:  "not JSON after a string holding an object",
			calls: []chat.ToolCall{call("c0", "terminal", `"{\"command\":\"ls\"}"`), call("c1", "terminal", "ls -la")},
			want: "Looking.\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"terminal\", \"arguments\": ls -la}\n</tool_call>",
		},
		{
			name: "a JSON array first, nested object and escapes second",
			calls: []chat.ToolCall{call("c0", "search", `["a", "b"]`),
				call("c1", "write_file", `{"path":"x.py","content":"a, b: \"c\"\n\u00e9<>","opts":[1,{"k":2}]}`)},
			want: "Looking.\n<tool_call>\n{\"name\": \"search\", \"arguments\": [\"a\", \"b\"]}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"x.py\", \"content\": \"a, b: \\\"c\\\"\\n\\u00e9<>\", \"opts\": [1, {\"k\": 2}]}}\n</tool_call>",
		},
		{
			name:  "a JSON string that holds no object, empty arguments before it",
			calls: []chat.ToolCall{call("c0", "list", ""), call("c1", "terminal", `"ls"`)},
			want: "Looking.\n<tool_call>\n{\"name\": \"list\", \"arguments\": {}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"terminal\", \"arguments\": \"ls\"}\n</tool_call>",
		},
		{
			name:  "every call renders",
			calls: []chat.ToolCall{call("c0", "terminal", `"{\"command\":\"ls\"}"`), call("c1", "list", `{"path": "."}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := make([]chat.Message, len(tt.calls))
			for i := range results {
				results[i] = tool("ok")
			}
			traj := newTraj(user("Write flatten(lst).")).
				assistant(asst("Looking.", tt.calls...)).
				then(results...).
				assistant(asst("Running.", toolCall("terminal", `{"command":"python x.py"}`)...)).
				then(tool("NameError: name 'x' is not defined")).
				assistant(asst("Done.")).
				build()
			var calls atomic.Int64
			tmpl := &strictTemplate{}
			d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: (&fakeTeacher{}).scorer(),
				Renderer: tmpl, Placement: opd.TaskPrompt, TopK: topK})
			res, err := d.Distill(context.Background(), []*rollout.Trajectory{traj})
			require.NoError(t, err)
			require.Equal(t, 1, res.Metrics.ScoredTurns, "turns: %+v", res.Sequences[0].Turns)
			require.Len(t, tmpl.renders, 1)

			want := chat.Clone(traj.Messages[1:2])[0]
			if tt.want != "" {
				want.Content, want.ToolCalls = tt.want, nil
			}
			if diff := cmp.Diff(want, tmpl.renders[0][1]); diff != "" {
				t.Errorf("rendered assistant message (-want +got):\n%s", diff)
			}
		})
	}
}
