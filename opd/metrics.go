package opd

import "maps"

// Metrics counts what a Distill call did. Counts add up across calls with
// [Metrics.Add]; [Metrics.Map] turns them into named values.
type Metrics struct {
	// Rollouts counts trajectories with at least one turn pair: the reference's
	// denominator for its means.
	Rollouts int
	// RolloutsWithHint counts trajectories with at least one hint.
	RolloutsWithHint int
	// Hints counts turns the judge gave a hint for.
	Hints int
	// ScoredTurns counts turns that got teacher rows.
	ScoredTurns int

	// Pairs counts turn pairs; NoSpanPairs those without a generated span to score
	// (not judged).
	Pairs, NoSpanPairs int
	// JudgeCalls counts Judge calls; JudgeErrors those that failed (their turns get no
	// hint).
	JudgeCalls, JudgeErrors int
	// Votes counts judge votes; UnparsedVotes those with Score 0, by reason in
	// UnparsedByReason.
	Votes, UnparsedVotes int
	// UnparsedByReason counts the UnparsedVotes by reason.
	UnparsedByReason map[string]int
	// AlignmentMismatches counts hinted turns left unscored because a scored position
	// failed the check by token id or fell outside the sampled tokens, or (Inline) the
	// turn's generation prompt is not a recorded generation-prompt segment.
	AlignmentMismatches int
	// TeacherTooLong counts hinted turns left unscored because their teacher sequence
	// would pass Config.MaxTeacherLen.
	TeacherTooLong int
	// TemplateDrift counts hinted turns left unscored because the hint could not be
	// rendered exactly (see [Templater]) or, with TaskPrompt, the rendered generation
	// prompt differs from the student's.
	TemplateDrift int
	// TeacherRequests counts Score calls; TeacherSequences the sequences sent;
	// TeacherPromptTokens their total length; TeacherPositions the positions scored.
	TeacherRequests, TeacherSequences, TeacherPromptTokens, TeacherPositions int
}

// Add adds o's counts to m.
func (m *Metrics) Add(o Metrics) {
	m.Rollouts += o.Rollouts
	m.RolloutsWithHint += o.RolloutsWithHint
	m.Hints += o.Hints
	m.ScoredTurns += o.ScoredTurns
	m.Pairs += o.Pairs
	m.NoSpanPairs += o.NoSpanPairs
	m.JudgeCalls += o.JudgeCalls
	m.JudgeErrors += o.JudgeErrors
	m.Votes += o.Votes
	m.UnparsedVotes += o.UnparsedVotes
	if len(o.UnparsedByReason) > 0 && m.UnparsedByReason == nil {
		m.UnparsedByReason = make(map[string]int, len(o.UnparsedByReason))
	}
	for r, n := range o.UnparsedByReason {
		m.UnparsedByReason[r] += n
	}
	m.AlignmentMismatches += o.AlignmentMismatches
	m.TemplateDrift += o.TemplateDrift
	m.TeacherTooLong += o.TeacherTooLong
	m.TeacherRequests += o.TeacherRequests
	m.TeacherSequences += o.TeacherSequences
	m.TeacherPromptTokens += o.TeacherPromptTokens
	m.TeacherPositions += o.TeacherPositions
}

// Map returns the metrics under their logged names. The reference's five
// (opd/mean_hints_per_rollout, opd/mean_turns_scored, opd/hint_rate, opd/total_hints,
// opd/total_scored_turns) are present only when Rollouts > 0, as in the reference;
// this library's counts always are: opd/turn_pairs, opd/no_span_pairs,
// opd/judge_calls, opd/judge_errors, opd/judge_votes, opd/unparsable_votes (and
// opd/unparsable_votes/REASON per reason), opd/alignment_mismatches,
// opd/template_drift, opd/teacher_too_long, opd/teacher_requests, opd/teacher_sequences,
// opd/teacher_prompt_tokens, opd/teacher_positions.
func (m Metrics) Map() map[string]float64 {
	out := map[string]float64{
		"opd/turn_pairs":            float64(m.Pairs),
		"opd/no_span_pairs":         float64(m.NoSpanPairs),
		"opd/judge_calls":           float64(m.JudgeCalls),
		"opd/judge_errors":          float64(m.JudgeErrors),
		"opd/judge_votes":           float64(m.Votes),
		"opd/unparsable_votes":      float64(m.UnparsedVotes),
		"opd/alignment_mismatches":  float64(m.AlignmentMismatches),
		"opd/template_drift":        float64(m.TemplateDrift),
		"opd/teacher_too_long":      float64(m.TeacherTooLong),
		"opd/teacher_requests":      float64(m.TeacherRequests),
		"opd/teacher_sequences":     float64(m.TeacherSequences),
		"opd/teacher_prompt_tokens": float64(m.TeacherPromptTokens),
		"opd/teacher_positions":     float64(m.TeacherPositions),
	}
	for r, n := range m.UnparsedByReason {
		out["opd/unparsable_votes/"+r] = float64(n)
	}
	if m.Rollouts > 0 {
		n := float64(m.Rollouts)
		maps.Copy(out, map[string]float64{
			"opd/mean_hints_per_rollout": float64(m.Hints) / n,
			"opd/mean_turns_scored":      float64(m.ScoredTurns) / n,
			"opd/hint_rate":              float64(m.RolloutsWithHint) / n,
			"opd/total_hints":            float64(m.Hints),
			"opd/total_scored_turns":     float64(m.ScoredTurns),
		})
	}
	return out
}
