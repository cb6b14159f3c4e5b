package opd

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

// plan maps the scored positions of one teacher sequence back to the student.
type plan struct {
	seq        int   // trajectory index
	studentPos []int // parallel to the request's positions
	turns      []*TurnResult
}

// span is one hinted turn inside a teacher sequence.
type span struct {
	w            *work
	studentStart int
	teacherStart int
	n            int
}

// build turns the hinted turns with tokens into the teacher request: with Inline one
// sequence per trajectory, with TaskPrompt one per turn. hinted is ordered by
// trajectory, then message.
func (d *Distiller) build(ctx context.Context, trajs []*rollout.Trajectory, hinted []*work) (scorer.Request, []plan) {
	req := scorer.Request{K: d.cfg.TopK}
	var plans []plan
	add := func(seq int, teacher []int32, spans []span) {
		if s, p, ok := d.collect(ctx, trajs[seq], teacher, spans); ok {
			p.seq = seq
			req.Sequences = append(req.Sequences, s)
			plans = append(plans, p)
		}
	}
	for i := 0; i < len(hinted); {
		j := i
		var ws []*work
		for ; j < len(hinted) && hinted[j].seq == hinted[i].seq; j++ {
			if hinted[j].res.Status == "" {
				ws = append(ws, hinted[j])
			}
		}
		seq := hinted[i].seq
		i = j
		if len(ws) == 0 {
			continue
		}
		t := trajs[seq]
		if d.cfg.Placement == Inline {
			ws = d.boundaries(ctx, t, ws)
			if len(ws) == 0 {
				continue
			}
			teacher, spans := inlineSequence(t, ws)
			add(seq, teacher, spans)
			continue
		}
		for _, w := range ws {
			turn := t.Turns[w.pair.TurnIndex]
			teacher := make([]int32, 0, len(w.tokens)+turn.End-turn.Start)
			teacher = append(append(teacher, w.tokens...), t.Tokens[turn.Start:turn.End]...)
			add(seq, teacher, []span{{w: w, studentStart: turn.Start, teacherStart: len(w.tokens), n: turn.End - turn.Start}})
		}
	}
	return req, plans
}

// boundaries keeps the turns of ws whose hint has a safe insertion point: the
// trajectory records a generation-prompt segment spanning exactly [GenPromptStart,
// Start) of the turn (reference multiturn-tokenization §4.5, step 1). Any other turn is
// marked as an alignment mismatch before its hint is inserted, so that a hint at a
// wrong place reaches neither its own turn nor a later one.
func (d *Distiller) boundaries(ctx context.Context, t *rollout.Trajectory, ws []*work) []*work {
	genPrompt := make(map[int]int) // start -> end of each generation-prompt segment
	for _, s := range t.Segments {
		if s.Kind == rollout.SegGenPrompt {
			genPrompt[s.Start] = s.End
		}
	}
	ok := ws[:0:0]
	for _, w := range ws {
		turn := t.Turns[w.pair.TurnIndex]
		if end, found := genPrompt[turn.GenPromptStart]; found && end == turn.Start {
			ok = append(ok, w)
			continue
		}
		detail := fmt.Sprintf("turn %d: [%d, %d) is not a recorded generation prompt; the hint has no safe insertion point",
			w.pair.TurnIndex, turn.GenPromptStart, turn.Start)
		w.res.Status, w.res.Detail = StatusMismatch, detail
		d.warn(ctx, "opd: alignment check failed; the turn is left unscored", w, fmt.Errorf("%s", detail))
	}
	return ok
}

// inlineSequence is the student's ids with each hint's tokens inserted at its turn's
// generation prompt, up to the end of the last hinted turn. A turn's teacher positions
// are its student positions shifted by the lengths of the hints inserted at or before
// its generation prompt.
func inlineSequence(t *rollout.Trajectory, ws []*work) ([]int32, []span) {
	n := 0
	for _, w := range ws {
		n += len(w.tokens)
	}
	last := t.Turns[ws[len(ws)-1].pair.TurnIndex]
	teacher := make([]int32, 0, last.End+n)
	spans := make([]span, 0, len(ws))
	prev, shift := 0, 0
	for _, w := range ws {
		turn := t.Turns[w.pair.TurnIndex]
		teacher = append(teacher, t.Tokens[prev:turn.GenPromptStart]...)
		teacher = append(teacher, w.tokens...)
		shift += len(w.tokens)
		prev = turn.GenPromptStart
		spans = append(spans, span{w: w, studentStart: turn.Start, teacherStart: turn.Start + shift, n: turn.End - turn.Start})
	}
	return append(teacher, t.Tokens[prev:last.End]...), spans
}

// collect checks every span position by token id and against the trajectory's sampled
// segments, marks failing turns, and returns the teacher sequence (cut after its last
// scored position) with the positions to score.
func (d *Distiller) collect(ctx context.Context, t *rollout.Trajectory, teacher []int32, spans []span) (scorer.Sequence, plan, bool) {
	sampled := sampledMask(t)
	var seq scorer.Sequence
	var p plan
	for _, s := range spans {
		if limit := d.cfg.MaxTeacherLen; limit > 0 && s.teacherStart+s.n > limit {
			s.w.res.Status = StatusTooLong
			s.w.res.Detail = fmt.Sprintf("the teacher sequence would be %d tokens, more than MaxTeacherLen %d", s.teacherStart+s.n, limit)
			continue
		}
		if detail := checkSpan(t.Tokens, sampled, teacher, s); detail != "" {
			s.w.res.Status, s.w.res.Detail = StatusMismatch, detail
			d.warn(ctx, "opd: alignment check failed; the turn is left unscored", s.w, fmt.Errorf("%s", detail))
			continue
		}
		for j := range s.n {
			seq.Positions = append(seq.Positions, s.teacherStart+j)
			p.studentPos = append(p.studentPos, s.studentStart+j)
		}
		p.turns = append(p.turns, s.w.res)
	}
	if len(seq.Positions) == 0 {
		return scorer.Sequence{}, plan{}, false
	}
	seq.Tokens = teacher[:seq.Positions[len(seq.Positions)-1]+1]
	return seq, p, true
}

// checkSpan returns "" when every position of s holds, in the teacher sequence, the
// student's sampled token, and otherwise what is wrong at the first bad position.
func checkSpan(student []int32, sampled []bool, teacher []int32, s span) string {
	for j := range s.n {
		sp, tp := s.studentStart+j, s.teacherStart+j
		switch {
		case !sampled[sp]:
			return fmt.Sprintf("student position %d is not a sampled token", sp)
		case tp < 1 || tp >= len(teacher):
			return fmt.Sprintf("teacher position %d is outside [1, %d)", tp, len(teacher))
		case teacher[tp] != student[sp]:
			return fmt.Sprintf("teacher position %d holds id %d, student position %d holds id %d", tp, teacher[tp], sp, student[sp])
		}
	}
	return ""
}

// sampledMask reports, per position, whether a SegSampled segment covers it.
func sampledMask(t *rollout.Trajectory) []bool {
	m := make([]bool, len(t.Tokens))
	for _, s := range t.Segments {
		if s.Kind == rollout.SegSampled {
			for i := s.Start; i < s.End; i++ {
				m[i] = true
			}
		}
	}
	return m
}

// score sends the request in one Score call and places the rows.
func (d *Distiller) score(ctx context.Context, req scorer.Request, plans []plan, res *Result) error {
	if len(req.Sequences) == 0 {
		return nil
	}
	out, err := d.cfg.Teacher.Score(ctx, req)
	if err != nil {
		return fmt.Errorf("opd: teacher: %w", err)
	}
	if err := out.Validate(req); err != nil {
		return fmt.Errorf("opd: teacher answer does not match its request: %w", err)
	}
	for i := 0; i < len(plans); {
		j := i
		for j < len(plans) && plans[j].seq == plans[i].seq {
			j++
		}
		seq := &res.Sequences[plans[i].seq]
		seq.Rows = placeRows(seq.Rows.Len(), plans[i:j], out.Sequences[i:j])
		for _, p := range plans[i:j] {
			for _, tr := range p.turns {
				tr.Status = StatusScored
			}
		}
		i = j
	}
	return nil
}

// placeRows lays the teacher's answers out at their student positions. When one
// answer covers the sequence (Inline placement) and its positions come in the
// student's order, as build makes them, the rows are that answer's entries as they
// stand, so the rows share the answer's arrays instead of copying them (a group's rows
// are megabytes); otherwise the entries are copied into place.
func placeRows(n int, plans []plan, results []scorer.SequenceResult) Rows {
	rows := emptyRows(n)
	ordered, prev := true, -1
	for k, p := range plans {
		r := &results[k]
		for i, sp := range p.studentPos {
			rows.Offsets[sp+1] = r.Offsets[i+1] - r.Offsets[i]
			rows.TokenLogprobs[sp] = r.TokenLogprobs[i]
			ordered = ordered && sp > prev
			prev = sp
		}
	}
	for p := range n {
		rows.Offsets[p+1] += rows.Offsets[p]
	}
	total := rows.Offsets[n]
	if r := &results[0]; len(plans) == 1 && ordered {
		lo, hi := r.Offsets[0], r.Offsets[len(r.Offsets)-1]
		rows.IDs, rows.Logprobs = r.TopIDs[lo:hi:hi], r.TopLogprobs[lo:hi:hi]
		return rows
	}
	rows.IDs, rows.Logprobs = make([]int32, total), make([]float32, total)
	for k, p := range plans {
		r := &results[k]
		for i, sp := range p.studentPos {
			ids, lps := r.Top(i)
			copy(rows.IDs[rows.Offsets[sp]:], ids)
			copy(rows.Logprobs[rows.Offsets[sp]:], lps)
		}
	}
	return rows
}

// count derives the call's metrics from its result and teacher request.
func (d *Distiller) count(res *Result, req scorer.Request) Metrics {
	var m Metrics
	for _, s := range res.Sequences {
		m.Pairs += len(s.Turns)
		if len(s.Turns) > 0 {
			m.Rollouts++
		}
		hints := 0
		for _, t := range s.Turns {
			if t.Status != StatusNoSpan {
				m.JudgeCalls++
			}
			for _, v := range t.Hint.Votes {
				m.Votes++
				if v.Score == 0 {
					m.UnparsedVotes++
					if m.UnparsedByReason == nil {
						m.UnparsedByReason = map[string]int{}
					}
					m.UnparsedByReason[v.Unparsed]++
				}
			}
			switch t.Status {
			case StatusNoSpan:
				m.NoSpanPairs++
			case StatusJudgeFailed:
				m.JudgeErrors++
			case StatusTemplateDrift:
				m.TemplateDrift++
				hints++
			case StatusMismatch:
				m.AlignmentMismatches++
				hints++
			case StatusTooLong:
				m.TeacherTooLong++
				hints++
			case StatusScored:
				m.ScoredTurns++
				hints++
			}
		}
		m.Hints += hints
		if hints > 0 {
			m.RolloutsWithHint++
		}
	}
	s := sent(req)
	m.TeacherRequests, m.TeacherSequences, m.TeacherPromptTokens = s.TeacherRequests, s.TeacherSequences, s.TeacherPromptTokens
	for _, s := range req.Sequences {
		m.TeacherPositions += len(s.Positions)
	}
	return m
}

// sent counts the teacher request req: one request when it has a sequence, its
// sequences and their tokens.
func sent(req scorer.Request) Metrics {
	var m Metrics
	if len(req.Sequences) > 0 {
		m.TeacherRequests = 1
	}
	m.TeacherSequences = len(req.Sequences)
	for _, s := range req.Sequences {
		m.TeacherPromptTokens += len(s.Tokens)
	}
	return m
}

// validate checks that t's turns, messages and segments fit together.
func validate(t *rollout.Trajectory) error {
	if t == nil {
		return fmt.Errorf("nil trajectory")
	}
	n := len(t.Tokens)
	for i, s := range t.Segments {
		if s.Start < 0 || s.Start > s.End || s.End > n {
			return fmt.Errorf("segment %d spans [%d, %d), outside the %d tokens", i, s.Start, s.End, n)
		}
	}
	prevEnd, prevMsg := 0, -1
	for k, turn := range t.Turns {
		switch {
		case turn.Message <= prevMsg || turn.Message >= len(t.Messages):
			return fmt.Errorf("turn %d: message %d out of order or out of range (%d messages)", k, turn.Message, len(t.Messages))
		case t.Messages[turn.Message].Role != chat.RoleAssistant:
			return fmt.Errorf("turn %d: message %d has role %q, want assistant", k, turn.Message, t.Messages[turn.Message].Role)
		case !(prevEnd <= turn.GenPromptStart && turn.GenPromptStart <= turn.Start && turn.Start <= turn.End && turn.End <= n):
			return fmt.Errorf("turn %d: generation prompt at %d and span [%d, %d) do not fit after position %d within %d tokens",
				k, turn.GenPromptStart, turn.Start, turn.End, prevEnd, n)
		case turn.Start == 0 && turn.End > 0:
			return fmt.Errorf("turn %d: the span starts at position 0, which has no context", k)
		}
		prevEnd, prevMsg = turn.End, turn.Message
	}
	return nil
}
