package atropos

import "testing"

// TestSizeHint checks that the estimate of a typical group's encoding covers it
// without asking for much more.
func TestSizeHint(t *testing.T) {
	var g ScoredDataGroup
	for s := range 4 {
		const L, K = 4000, 50
		toks, masks, lps := make([]int, L), make([]int, L), make([]float64, L)
		d := NewDistillRows(L)
		ids, tlps := make([]int32, K), make([]float32, K)
		for i := range L {
			toks[i] = (i*7919 + s) % 151643
			masks[i], lps[i] = MaskIgnore, MaskedLogprob
			if i > L/4 {
				masks[i], lps[i] = toks[i], -float64(i%1000)/997
			}
			if i%4 == 3 {
				for k := range K {
					ids[k], tlps[k] = int32((i*31+k*977)%151643), -float32(k)*0.173-float32(i%13)*0.01
				}
				if err := d.SetRow(i, ids, tlps); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := g.Add(Sequence{Tokens: toks, Masks: masks, Score: float64(s), InferenceLogprobs: lps, Distill: d}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []int{0, 50} {
		out, err := g.AppendJSON([]byte{}, &EncodeOptions{DenseZeroPad: k})
		if err != nil {
			t.Fatal(err)
		}
		hint := g.sizeHint(k)
		if hint < len(out) || hint > 2*len(out) {
			t.Errorf("DenseZeroPad %d: size hint %d for %d bytes; want within [1, 2] times", k, hint, len(out))
		}
	}
}
