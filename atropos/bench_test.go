package atropos_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/agentic-opd/agenticopd/atropos"
)

// bigGroup builds n sequences of L tokens with a prompt of L/4 masked tokens,
// inference logprobs, messages, and K teacher candidates on every fourth position.
func bigGroup(n, L, K int) *atropos.ScoredDataGroup {
	var g atropos.ScoredDataGroup
	for s := range n {
		toks := make([]int, L)
		masks := make([]int, L)
		lps := make([]float64, L)
		d := atropos.NewDistillRows(L)
		ids := make([]int32, K)
		tlps := make([]float32, K)
		for i := range L {
			toks[i] = (i*7919 + s) % 151643
			if i < L/4 {
				masks[i], lps[i] = atropos.MaskIgnore, atropos.MaskedLogprob
			} else {
				masks[i], lps[i] = toks[i], -float64(i%1000)/997
			}
			if i%4 == 3 {
				for k := range K {
					ids[k] = int32((i*31 + k*977) % 151643)
					tlps[k] = -float32(k)*0.173 - float32(i%13)*0.01
				}
				_ = d.SetRow(i, ids, tlps)
			}
		}
		_ = g.Add(atropos.Sequence{Tokens: toks, Masks: masks, Score: float64(s) / float64(n), InferenceLogprobs: lps, Distill: d})
	}
	return &g
}

// BenchmarkEncodeGroup encodes a group of 8 sequences × 16384 tokens with K=50 teacher
// rows on a quarter of the positions. MB/s counts the encoded JSON bytes.
func BenchmarkEncodeGroup(b *testing.B) {
	g := bigGroup(8, 16384, 50)
	size, err := g.AppendJSON(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(size)))
	b.ReportAllocs()
	enc := atropos.NewEncoder(io.Discard)
	for b.Loop() {
		if err := enc.Encode(g); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(size))/1e6, "MB/group")
}

// BenchmarkDecodeGroup decodes the same group.
func BenchmarkDecodeGroup(b *testing.B) {
	data, err := bigGroup(8, 16384, 50).MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var g atropos.ScoredDataGroup
		if err := g.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeGroupNested encodes the same data as nested slices with encoding/json,
// the obvious alternative, for comparison.
func BenchmarkEncodeGroupNested(b *testing.B) {
	g := bigGroup(8, 16384, 50)
	type nested struct {
		Tokens            [][]int       `json:"tokens"`
		Masks             [][]int       `json:"masks"`
		Scores            []float64     `json:"scores"`
		InferenceLogprobs [][]float64   `json:"inference_logprobs"`
		DistillTokenIDs   [][][]int32   `json:"distill_token_ids"`
		DistillLogprobs   [][][]float32 `json:"distill_logprobs"`
	}
	v := nested{Tokens: g.Tokens, Masks: g.Masks, Scores: g.Scores, InferenceLogprobs: g.InferenceLogprobs}
	for _, r := range g.Distill {
		ids := make([][]int32, r.Len())
		lps := make([][]float32, r.Len())
		for pos := range r.Len() {
			ids[pos], lps[pos] = r.Row(pos)
			if ids[pos] == nil {
				ids[pos], lps[pos] = []int32{}, []float32{}
			}
		}
		v.DistillTokenIDs = append(v.DistillTokenIDs, ids)
		v.DistillLogprobs = append(v.DistillLogprobs, lps)
	}
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := json.NewEncoder(io.Discard).Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}
