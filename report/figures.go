package report

import (
	"fmt"
	"math"
	"slices"
)

// Figures are a sequence's teacher figures as the page's table shows them: the page
// computes its table with [Sequence.Figures], so a program that prints or logs these
// numbers shows what the page shows.
//
// They depend only on what every source of a [Sequence] carries: the teacher's rows
// (distill_token_ids / distill_logprobs, as the trainer receives them) and the
// student's logprobs. A sequence built from a group in memory (the root package's
// Group.Report, which also knows the teacher's exact logprob of every sampled token)
// and the same group read back from JSON Lines ([FromScoredData], which may not) give
// the same Figures.
type Figures struct {
	// Scored counts the positions with a teacher row.
	Scored int
	// OutsideTopK counts the scored positions whose sampled token is not among the
	// entries of its row ("below top-K"): there the rows give only an upper bound on
	// the teacher's logprob of the sampled token, the row's lowest logprob.
	OutsideTopK int
	// DeltaPositions counts the positions MeanDelta is taken over: scored, the sampled
	// token in the row, and a student logprob known.
	DeltaPositions int
	// MeanDelta is the mean, over DeltaPositions, of the teacher's logprob of the
	// sampled token (its entry in the row) minus the student's. Positions outside the
	// top-K are left out, never counted at their bound; NaN when DeltaPositions is 0.
	MeanDelta float64
}

// Figures returns the sequence's teacher figures. A per-token slice whose length
// differs from Tokens is an error, as in [Writer.Add].
func (s *Sequence) Figures() (Figures, error) {
	if err := s.check(); err != nil {
		return Figures{}, err
	}
	var f Figures
	sum := 0.0
	for p := range s.Tokens {
		t := s.teacherAt(p)
		switch {
		case !t.scored:
			continue
		case t.outside:
			f.OutsideTopK++
		case !math.IsNaN(t.delta):
			sum += t.delta
			f.DeltaPositions++
		}
		f.Scored++
	}
	f.MeanDelta = math.NaN()
	if f.DeltaPositions > 0 {
		f.MeanDelta = sum / float64(f.DeltaPositions)
	}
	return f, nil
}

// check reports a per-token slice whose length differs from Tokens.
func (s *Sequence) check() error {
	n := len(s.Tokens)
	for _, f := range []struct {
		name string
		l    int
		set  bool
	}{
		{"Kinds", len(s.Kinds), s.Kinds != nil}, {"Masked", len(s.Masked), s.Masked != nil},
		{"StudentLogprobs", len(s.StudentLogprobs), s.StudentLogprobs != nil},
		{"TeacherLogprobs", len(s.TeacherLogprobs), s.TeacherLogprobs != nil},
		{"Rows", s.Rows.Len(), s.Rows != nil},
	} {
		if f.set && f.l != n {
			return fmt.Errorf("%d %s for %d tokens", f.l, f.name, n)
		}
	}
	return nil
}

// teacher is what is known at one position about the teacher's view of the sampled
// token.
type teacher struct {
	scored  bool // the position has a row
	outside bool // scored, and the sampled token is not in the row
	entries int  // the row's entries (the data's K at this position)
	// rank is the sampled token's 1-based rank in the row; 0 when outside.
	rank int
	// logprob is the teacher's logprob of the sampled token: its row entry when
	// inside; when outside, Sequence.TeacherLogprobs' value if given, else NaN.
	logprob float64
	// bound is, when outside, the row's lowest logprob: an upper bound on the
	// teacher's logprob of the sampled token. NaN otherwise.
	bound float64
	// student is the student's logprob of the sampled token (NaN for none).
	student float64
	// delta is logprob minus student when inside and both are known; NaN otherwise
	// (outside the top-K a delta is never taken from a bound).
	delta float64
}

// teacherAt returns the teacher's view of position p. The caller has checked the
// lengths of s's slices.
func (s *Sequence) teacherAt(p int) teacher {
	t := teacher{logprob: math.NaN(), bound: math.NaN(), student: math.NaN(), delta: math.NaN()}
	// A positive logprob is no logprob (Atropos's masked sentinel is 1.0), as the page
	// stores it.
	if s.StudentLogprobs != nil && s.StudentLogprobs[p] <= 0 {
		t.student = s.StudentLogprobs[p]
	}
	if s.Rows == nil {
		return t
	}
	ids, lps := s.Rows.Row(p)
	if len(ids) == 0 {
		return t
	}
	t.scored, t.entries = true, len(ids)
	if i := slices.Index(ids, s.Tokens[p]); i >= 0 {
		t.rank, t.logprob = i+1, float64(lps[i])
		if !math.IsNaN(t.student) {
			t.delta = t.logprob - t.student
		}
		return t
	}
	t.outside, t.bound = true, float64(slices.Min(lps))
	if s.TeacherLogprobs != nil && s.TeacherLogprobs[p] <= 0 {
		t.logprob = s.TeacherLogprobs[p]
	}
	return t
}
