package vllmtest

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"unicode/utf8"
)

// writeLegacyLogprobsReference is the straightforward writing of the logprobs block: top_logprobs maps
// hold the chosen token first, then the top-k (k or k+1 entries).
func (s *Server) writeLegacyLogprobsReference(j *jw, c genChoice, k int, asIDs bool) {
	k = s.topK(k)
	seq := append(append([]int32(nil), c.prompt...), c.ids...)
	j.raw(`{"text_offset":[`)
	off := 0
	for i, id := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		j.int(int64(off))
		off += utf8.RuneCountInString(s.tokenKey(id, asIDs))
	}
	j.raw(`],"token_logprobs":[`)
	for i := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		j.logprob(c.logprobs[i])
	}
	j.raw(`],"tokens":[`)
	for i, id := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		j.str(s.tokenKey(id, asIDs))
	}
	j.raw(`],"top_logprobs":[`)
	var top []int32
	for i, id := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		d := s.lm.at(seq, len(c.prompt)+i)
		j.raw("{")
		j.str(s.tokenKey(id, asIDs))
		j.raw(":")
		j.logprob(d.logprob(id))
		top = d.topK(k, top[:0])
		seen := map[string]bool{s.tokenKey(id, asIDs): true}
		for _, t := range top {
			key := s.tokenKey(t, asIDs)
			if seen[key] {
				continue // string keys collide as they do in vLLM
			}
			seen[key] = true
			j.raw(",")
			j.str(key)
			j.raw(":")
			j.logprob(d.logprob(t))
		}
		j.raw("}")
	}
	j.raw("]}")
}

// TestLegacyLogprobsLikeReference checks writeLegacyLogprobs, byte for byte, against
// the reference writing on generated and scripted choices, with both key forms and
// several widths.
func TestLegacyLogprobsLikeReference(t *testing.T) {
	s := NewServer(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 60 {
		prompt := make([]int32, rng.IntN(6))
		for i := range prompt {
			prompt[i] = int32(rng.IntN(s.tok.vocabSize()))
		}
		var c continuation
		if trial%2 == 0 {
			c = s.lm.generate(prompt, 1+rng.IntN(40), samplerParams{temperature: 1, topP: 1, repetition: 1}, rng)
		} else {
			c = s.lm.force(prompt, s.tok.encode("héllo <tag> & \"quoted\" wörld\n\tdone"), 64)
		}
		g := genChoice{continuation: c, prompt: prompt}
		for _, k := range []int{0, 1, 3, 20} {
			for _, asIDs := range []bool{true, false} {
				var got, want bytes.Buffer
				gj := &jw{w: bufio.NewWriter(&got)}
				s.writeLegacyLogprobs(gj, g, k, asIDs)
				_ = gj.w.Flush()
				wj := &jw{w: bufio.NewWriter(&want)}
				s.writeLegacyLogprobsReference(wj, g, k, asIDs)
				_ = wj.w.Flush()
				if got.String() != want.String() {
					t.Fatalf("trial %d, k=%d, asIDs=%v:\n got %s\nwant %s", trial, k, asIDs, got.String(), want.String())
				}
			}
		}
	}
}

// TestIDsLikeReference checks the batched id-list writer against writing one id at a time.
func TestIDsLikeReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 2, 5000, 20000} {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = rng.Int32() - 1<<30
		}
		var got bytes.Buffer
		j := &jw{w: bufio.NewWriter(&got)}
		j.ids(ids)
		_ = j.w.Flush()
		want := []byte{'['}
		for i, id := range ids {
			if i > 0 {
				want = append(want, ',')
			}
			want = strconv.AppendInt(want, int64(id), 10)
		}
		want = append(want, ']')
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%d ids: lists differ", n)
		}
	}
}
