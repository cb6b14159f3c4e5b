package report

import (
	"math"
	"strconv"

	"github.com/agentic-opd/agenticopd/atropos"
)

// Kind says where a token came from; the page colours each kind differently.
type Kind uint8

// Token kinds.
const (
	// KindPrompt is the first prompt and chat-template text (generation prompts,
	// separators, end-of-turn tokens the library added).
	KindPrompt Kind = iota
	// KindGenerated is a token the policy sampled.
	KindGenerated
	// KindTool is template text the library appended after a turn: tool results and
	// other appended messages.
	KindTool
	// KindHint is a hint token (only in teacher sequences).
	KindHint
)

// Group is one group as the page shows it.
type Group struct {
	// Title names the group (the task id).
	Title string
	// Note is shown under the title ("dropped: scores_equal"); "" for none.
	Note string
	// Metrics are the group's metrics, shown as a table (nil for none).
	Metrics map[string]float64
	// Sequences are the group's rollouts, one row each in the group's table.
	Sequences []Sequence
}

// Term is one named number of a score's breakdown, or one fact about a rollout.
type Term struct {
	Name  string // the column's name ("correctness")
	Value string // as shown ("1.000")
}

// Hint is a hint and the token position it was given before (the generation prompt
// of the turn it is for).
type Hint struct {
	Pos  int    // the token position the hint is shown before
	Text string // the hint
}

// Sequence is one rollout: its tokens and what is known about each.
//
// Every per-token slice is either nil or as long as Tokens. NaN in StudentLogprobs or
// TeacherLogprobs means "none at this position".
type Sequence struct {
	// Label names the sequence ("rollout 2").
	Label string
	// Score is the sequence's score.
	Score float64
	// Breakdown are the score's parts (correctness, …), in order.
	Breakdown []Term
	// Info are other facts shown in the rollout's row (turns, stop reason, …).
	Info []Term

	// Tokens are the sequence's token ids.
	Tokens []int32
	// Kinds is each token's kind; nil means KindPrompt before the first unmasked
	// token, KindGenerated at unmasked tokens and KindTool at masked tokens after the
	// first unmasked one.
	Kinds []Kind
	// Masked marks tokens not trained on; the page mutes them. Nil means none.
	Masked []bool
	// StudentLogprobs are the sampling logprobs of the sampled tokens.
	StudentLogprobs []float64
	// TeacherLogprobs are the teacher's logprobs of the sampled tokens, where a
	// source knows them apart from the rows (opd keeps them; ref_logprobs may carry
	// them); nil for none. The page takes the teacher's logprob of a sampled token
	// from its row of Rows. Where the token is not among the row's entries, the rows
	// give only an upper bound (the row's lowest logprob): the page marks the position
	// as outside the top-K and shows the bound, and this value, when given, only in
	// the tooltip; it never enters [Figures], so a sequence gives the same figures
	// with and without it.
	TeacherLogprobs []float64
	// Rows are the teacher's top-K per position (empty rows where the teacher was not
	// asked); nil for none. A position with a row is a scored position.
	Rows *atropos.DistillRows
	// Hints are the hints given for this rollout's turns.
	Hints []Hint
	// HintsUnknown says that the source does not tell which hints the rollout had
	// (JSON Lines of groups carry none: see [FromScoredData]): the page then shows the
	// hint count as unknown ("–"), never as 0.
	HintsUnknown bool
}

// FromScoredData returns the page's view of an Atropos group as read from JSON Lines:
// tokens, masks, scores, inference logprobs (the student's) and distill rows (the
// teacher's). Such a group carries no segment table and no hints, so kinds follow the
// rule of [Sequence.Kinds], no hint is shown and the hint count is unknown
// ([Sequence.HintsUnknown]: the table says "–", not 0); ref_logprobs, when present and not
// the masked sentinel, are taken as the teacher's logprobs of the sampled tokens (the
// library's TeacherLogprobsAsRef).
func FromScoredData(title string, g *atropos.ScoredDataGroup) Group {
	out := Group{Title: title}
	for s := range g.Len() {
		seq := Sequence{
			Label:  "sequence " + strconv.Itoa(s),
			Tokens: make([]int32, len(g.Tokens[s])),
			Masked: make([]bool, len(g.Tokens[s])),

			HintsUnknown: true,
		}
		if s < len(g.Scores) {
			seq.Score = g.Scores[s]
		}
		for p, id := range g.Tokens[s] {
			seq.Tokens[p] = int32(id)
			seq.Masked[p] = p < len(g.Masks[s]) && g.Masks[s][p] == atropos.MaskIgnore
		}
		seq.StudentLogprobs = logprobs(g.InferenceLogprobs, s, len(seq.Tokens), seq.Masked)
		if g.RefLogprobs != nil {
			seq.TeacherLogprobs = logprobs(g.RefLogprobs, s, len(seq.Tokens), nil)
		}
		if s < len(g.Distill) && g.Distill[s] != nil && g.Distill[s].Len() == len(seq.Tokens) {
			seq.Rows = g.Distill[s]
		}
		out.Sequences = append(out.Sequences, seq)
	}
	return out
}

// logprobs returns sequence s of m with NaN at masked positions and at the masked
// sentinel (1.0); nil when m has no such sequence of the right length.
func logprobs(m [][]float64, s, n int, masked []bool) []float64 {
	if s >= len(m) || len(m[s]) != n {
		return nil
	}
	out := make([]float64, n)
	for p, v := range m[s] {
		if v > 0 || (masked != nil && masked[p]) {
			v = math.NaN()
		}
		out[p] = v
	}
	return out
}
