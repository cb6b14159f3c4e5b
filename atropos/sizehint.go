package atropos

// sizeHint estimates the length of g's JSON encoding from its sizes, without
// formatting anything, so that AppendJSON can allocate once instead of growing its
// buffer (a group of 16k-token sequences with teacher rows encodes to tens of MB).
// It errs on the large side for typical values: ids of up to six digits, logprobs of
// about ten characters.
func (g *ScoredDataGroup) sizeHint(denseK int) int {
	n := 512
	for s := range g.Tokens {
		L := len(g.Tokens[s])
		n += 16 * L // tokens and masks: "151643," each
		for _, m := range [][][]float64{g.InferenceLogprobs, g.Advantages, g.RefLogprobs} {
			if s < len(m) {
				n += 12 * len(m[s])
			}
		}
		if s < len(g.Messages) {
			for _, m := range g.Messages[s] {
				n += len(m) + 1
			}
		}
		if s < len(g.Distill) {
			r := g.Distill[s]
			entries := r.Entries()
			n += 4*r.Len() + 20*entries // "[]," per row twice; "151643," and "-12.345678," per entry
			if pad := r.Len()*denseK - entries; pad > 0 {
				n += 4 * pad // "0," in each array
			}
		}
	}
	return n
}
