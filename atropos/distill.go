package atropos

import (
	"fmt"
	"slices"
)

// DistillRows holds the teacher rows of one sequence in compact form: one row per token
// position, each row a list of candidate token ids with their teacher logprobs, stored in
// two flat arrays with a per-position offset and length.
//
// An empty row means "the teacher was not asked at this position" (position 0, prompt,
// tool output, unscored turns). Rows are never padded with zeros: id 0 at logprob 0
// would read as "probability 1 on token 0". Use [DistillRows.DenseZeroPad] or
// [EncodeOptions.DenseZeroPad] when a consumer needs the fixed L×K zero layout.
//
// The zero value has no positions. A DistillRows is not safe for concurrent mutation;
// concurrent reads are safe.
type DistillRows struct {
	start []int32 // start[pos]: offset of the row in ids/lps
	n     []int32 // n[pos]: length of the row
	ids   []int32
	lps   []float32
}

// NewDistillRows returns rows for a sequence of n tokens, all empty.
func NewDistillRows(n int) *DistillRows {
	if n < 0 {
		panic("atropos: NewDistillRows: negative length")
	}
	return &DistillRows{start: make([]int32, n), n: make([]int32, n)}
}

// FlatDistillRows returns the rows of a sequence of len(offsets)-1 positions laid out
// flat, as opd.Rows holds them: the row at pos is ids[offsets[pos]:offsets[pos+1]]
// with the logprobs lps at the same offsets. The rows share ids and lps instead of
// copying them (a group's rows are megabytes), so the caller must not change them
// afterwards; rows set later with [DistillRows.SetRow] go to arrays of their own. The
// offsets must not decrease, and must stay within ids, which must be as long as lps.
func FlatDistillRows(offsets, ids []int32, lps []float32) (*DistillRows, error) {
	if len(offsets) == 0 {
		return nil, fmt.Errorf("atropos: flat distill rows without offsets")
	}
	if len(ids) != len(lps) {
		return nil, fmt.Errorf("atropos: flat distill rows: %d ids but %d logprobs", len(ids), len(lps))
	}
	n := len(offsets) - 1
	r := &DistillRows{start: make([]int32, n), n: make([]int32, n), ids: ids[:len(ids):len(ids)], lps: lps[:len(lps):len(lps)]}
	for p := range n {
		lo, hi := offsets[p], offsets[p+1]
		if lo < 0 || hi < lo || int(hi) > len(ids) {
			return nil, fmt.Errorf("atropos: flat distill row %d spans [%d, %d) of %d entries", p, lo, hi, len(ids))
		}
		if hi > lo {
			r.start[p], r.n[p] = lo, hi-lo
		}
	}
	return r, nil
}

// Len returns the number of positions (the sequence length the rows were made for).
func (r *DistillRows) Len() int {
	if r == nil {
		return 0
	}
	return len(r.n)
}

// Entries returns the total number of (id, logprob) pairs over all rows.
func (r *DistillRows) Entries() int {
	if r == nil {
		return 0
	}
	total := 0
	for _, n := range r.n {
		total += int(n)
	}
	return total
}

// SetRow sets the row at pos to the candidates ids with teacher logprobs lps, copying
// both. Rows may be set in any order; setting a row again replaces it (the old entries
// stay in the flat arrays until [DistillRows.Compact]). An empty ids marks the position
// as not scored. SetRow returns an error when pos is out of range or the two slices
// differ in length.
func (r *DistillRows) SetRow(pos int, ids []int32, lps []float32) error {
	if pos < 0 || pos >= len(r.n) {
		return fmt.Errorf("atropos: distill row %d out of range [0,%d)", pos, len(r.n))
	}
	if len(ids) != len(lps) {
		return fmt.Errorf("atropos: distill row %d: %d ids but %d logprobs", pos, len(ids), len(lps))
	}
	if len(ids) == 0 {
		r.start[pos], r.n[pos] = 0, 0
		return nil
	}
	r.start[pos] = int32(len(r.ids))
	r.n[pos] = int32(len(ids))
	r.ids = append(r.ids, ids...)
	r.lps = append(r.lps, lps...)
	return nil
}

// Grow makes room for n more (id, logprob) entries, so that the SetRow calls that add
// them do not reallocate the flat arrays: a caller that knows how many entries it will
// set saves the spare capacity that growing by appending leaves (up to a quarter of
// the rows' memory). A negative n panics, as with slices.Grow.
func (r *DistillRows) Grow(n int) {
	r.ids = slices.Grow(r.ids, n)
	r.lps = slices.Grow(r.lps, n)
}

// Row returns the row at pos. The slices alias the compact storage: callers must not
// modify them. Row panics when pos is out of range, like a slice index.
func (r *DistillRows) Row(pos int) (ids []int32, lps []float32) {
	s, n := r.start[pos], r.n[pos]
	return r.ids[s : s+n : s+n], r.lps[s : s+n : s+n]
}

// Compact rewrites the flat arrays so they hold only live rows, in position order.
// It is only useful after rows were replaced.
func (r *DistillRows) Compact() {
	total := r.Entries()
	if total == len(r.ids) {
		return
	}
	ids := make([]int32, 0, total)
	lps := make([]float32, 0, total)
	for pos := range r.n {
		s, n := r.start[pos], r.n[pos]
		r.start[pos] = int32(len(ids))
		ids = append(ids, r.ids[s:s+n]...)
		lps = append(lps, r.lps[s:s+n]...)
	}
	r.ids, r.lps = ids, lps
}

// Clone returns a deep, compacted copy of r.
func (r *DistillRows) Clone() *DistillRows {
	if r == nil {
		return nil
	}
	c := NewDistillRows(r.Len())
	c.ids = make([]int32, 0, r.Entries())
	c.lps = make([]float32, 0, r.Entries())
	for pos := range r.n {
		ids, lps := r.Row(pos)
		if len(ids) > 0 {
			c.start[pos], c.n[pos] = int32(len(c.ids)), int32(len(ids))
			c.ids = append(c.ids, ids...)
			c.lps = append(c.lps, lps...)
		}
	}
	return c
}

// DenseZeroPad returns the rows in the fixed L×k layout of the hermes OPD environment:
// every position gets exactly k entries, rows longer than k are cut to their first k
// entries (the best ones when the row is sorted by teacher rank, as the vllm package
// builds rows; rows read from elsewhere may be in any order), shorter rows and empty
// rows are padded with id 0 and logprob 0. This layout loses the difference between
// "not scored" and "certain of token 0"; use it only for trainers that need it.
// DenseZeroPad panics when k < 1.
func (r *DistillRows) DenseZeroPad(k int) (ids [][]int32, lps [][]float32) {
	if k < 1 {
		panic("atropos: DenseZeroPad: k must be at least 1")
	}
	L := r.Len()
	flatIDs := make([]int32, L*k)
	flatLps := make([]float32, L*k)
	ids = make([][]int32, L)
	lps = make([][]float32, L)
	for pos := range L {
		ri, rl := r.Row(pos)
		n := min(len(ri), k)
		copy(flatIDs[pos*k:], ri[:n])
		copy(flatLps[pos*k:], rl[:n])
		ids[pos] = flatIDs[pos*k : (pos+1)*k : (pos+1)*k]
		lps[pos] = flatLps[pos*k : (pos+1)*k : (pos+1)*k]
	}
	return ids, lps
}

// appendPos starts the next, empty row during decoding: rows arrive in position order.
func (r *DistillRows) appendPos() {
	r.start = append(r.start, int32(len(r.ids)))
	r.n = append(r.n, 0)
}
