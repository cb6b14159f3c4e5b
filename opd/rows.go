package opd

import "fmt"

// Rows holds the teacher's rows for one student sequence, one per token position, in a
// flat layout: position p's ranked entries are IDs[Offsets[p]:Offsets[p+1]] and
// Logprobs[Offsets[p]:Offsets[p+1]], most likely first. A position the teacher was not
// asked about (position 0, prompt, tool output, turns without a hint, turns whose
// alignment check failed) has no entries. TokenLogprobs[p] is the teacher's logprob of
// the student's token at p, meaningful only where [Rows.Scored] reports true.
//
// Rows made by a [Distiller] share IDs and Logprobs with the teacher's answer where one
// answer covers the sequence in order (Inline placement), instead of copying megabytes
// per group: treat them as read-only, as the teacher's answer is.
//
// The zero Rows describes an empty sequence.
type Rows struct {
	// Offsets has one entry per token position plus one.
	Offsets []int32
	// IDs are the teacher's ranked token ids of all positions, back to back.
	IDs []int32
	// Logprobs are the teacher's logprobs, parallel to IDs.
	Logprobs []float32
	// TokenLogprobs has one entry per position: the teacher's logprob of the student's token.
	TokenLogprobs []float32
}

// Len returns the number of token positions.
func (r *Rows) Len() int { return max(0, len(r.Offsets)-1) }

// Row returns the ranked ids and logprobs at position p; both are empty when p was not
// scored. The caller must not modify them.
func (r *Rows) Row(p int) (ids []int32, logprobs []float32) {
	lo, hi := r.Offsets[p], r.Offsets[p+1]
	return r.IDs[lo:hi:hi], r.Logprobs[lo:hi:hi]
}

// Scored reports whether position p has a teacher row.
func (r *Rows) Scored(p int) bool { return r.Offsets[p+1] > r.Offsets[p] }

// ScoredPositions returns the number of positions with a teacher row.
func (r *Rows) ScoredPositions() int {
	n := 0
	for p := range r.Len() {
		if r.Scored(p) {
			n++
		}
	}
	return n
}

// Dense returns the rows in Atropos's distill_token_ids / distill_logprobs layout,
// [position][k], with an empty (non-nil) row at every position not scored.
func (r *Rows) Dense() (ids [][]int32, logprobs [][]float32) {
	n := r.Len()
	ids, logprobs = make([][]int32, n), make([][]float32, n)
	for p := range n {
		i, l := r.Row(p)
		ids[p], logprobs[p] = append([]int32{}, i...), append([]float32{}, l...)
	}
	return ids, logprobs
}

// ZeroPadded returns the reference's fixed layout: k entries at every position, rows
// cut to k and padded with id 0 and logprob 0, and all-zero rows where nothing was
// scored. Zeros are not neutral (logprob 0 on id 0 reads as certainty of token 0); use
// it only for trainers that need the fixed shape. A negative k is a programmer error
// and panics.
func (r *Rows) ZeroPadded(k int) (ids [][]int32, logprobs [][]float32) {
	if k < 0 {
		panic(fmt.Sprintf("opd: Rows.ZeroPadded: k is %d, want ≥ 0", k))
	}
	n := r.Len()
	ids, logprobs = make([][]int32, n), make([][]float32, n)
	flatIDs, flatLps := make([]int32, n*k), make([]float32, n*k)
	for p := range n {
		ids[p], logprobs[p] = flatIDs[p*k:(p+1)*k:(p+1)*k], flatLps[p*k:(p+1)*k:(p+1)*k]
		i, l := r.Row(p)
		copy(ids[p], i)
		copy(logprobs[p], l)
	}
	return ids, logprobs
}

// emptyRows returns Rows for n positions, none scored.
func emptyRows(n int) Rows {
	return Rows{Offsets: make([]int32, n+1), TokenLogprobs: make([]float32, n)}
}
