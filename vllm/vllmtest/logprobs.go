package vllmtest

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// topK turns a requested k (-1: the whole vocabulary) into a count of entries.
func (s *Server) topK(k int) int {
	if k < 0 || k > s.tok.vocabSize() {
		return s.tok.vocabSize()
	}
	return k
}

// writePromptLogprobs writes vLLM's prompt_logprobs list: null, then per position the
// actual token first, then the top-k by rank (k or k+1 entries).
func (s *Server) writePromptLogprobs(j *jw, prompt []int32, k int) {
	k = s.topK(k)
	top := make([]int32, 0, k)
	shift := s.shiftAt(prompt)
	j.raw("[null")
	for i := 1; i < len(prompt); i++ {
		d := s.modelAt(i, shift).at(prompt, i)
		actual := prompt[i]
		b := append(j.buf[:0], ",{"...)
		b = s.appendPromptEntry(b, &d, actual, d.rank(actual))
		top = d.topK(k, top[:0])
		for r, id := range top {
			if id == actual {
				continue
			}
			b = append(b, ',')
			b = s.appendPromptEntry(b, &d, id, r+1)
		}
		b = append(b, '}')
		j.bytes(b)
		j.buf = b
	}
	j.raw("]")
}

// appendPromptEntry appends "id":{"logprob":…,"rank":…,"decoded_token":…}.
func (s *Server) appendPromptEntry(b []byte, d *dist, id int32, rank int) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `":{"logprob":`...)
	b = strconv.AppendFloat(b, float64(clampLogprob(d.logprob(id))), 'g', -1, 64)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, `,"decoded_token":`...)
	b = append(b, s.tok.jsonPiece[id]...)
	return append(b, '}')
}

// tokenKey is a token's string in the legacy logprobs block.
func (s *Server) tokenKey(id int32, asIDs bool) string {
	if asIDs {
		return "token_id:" + strconv.Itoa(int(id))
	}
	return strings.ToValidUTF8(string(s.tok.pieces[id]), "\uFFFD")
}

// writeLegacyLogprobs writes the OpenAI completions logprobs block: top_logprobs maps
// hold the chosen token first, then the top-k (k or k+1 entries).
//
// The chosen token's logprob is c.logprobs[i], computed when the token was generated
// or forced; the model is asked again only for the top-k. With token-id keys
// ("token_id:N", distinct for distinct ids) the block is written without building
// strings or maps.
func (s *Server) writeLegacyLogprobs(j *jw, c genChoice, k int, asIDs bool) {
	k = s.topK(k)
	tail := contextTail(c.prompt, c.ids)
	at := len(tail) - len(c.ids) // the position of c.ids[0] in tail
	lm := s.genModel(c.prompt)
	j.raw(`{"text_offset":[`)
	off := 0
	for i, id := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		j.int(int64(off))
		if asIDs {
			off += len("token_id:") + decimalLen(id)
		} else {
			off += utf8.RuneCountInString(s.tokenKey(id, false))
		}
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
		s.writeTokenKey(j, id, asIDs)
	}
	j.raw(`],"top_logprobs":[`)
	var top []int32
	for i, id := range c.ids {
		if i > 0 {
			j.raw(",")
		}
		j.raw("{")
		s.writeTokenKey(j, id, asIDs)
		j.raw(":")
		j.logprob(c.logprobs[i])
		if k > 0 {
			d := lm.at(tail, at+i)
			top = d.topK(k, top[:0])
			var seen map[string]bool
			if !asIDs {
				seen = map[string]bool{s.tokenKey(id, false): true}
			}
			for _, t := range top {
				if asIDs {
					if t == id {
						continue
					}
				} else {
					key := s.tokenKey(t, false)
					if seen[key] {
						continue // string keys collide as they do in vLLM
					}
					seen[key] = true
				}
				j.raw(",")
				s.writeTokenKey(j, t, asIDs)
				j.raw(":")
				j.logprob(d.logprob(t))
			}
		}
		j.raw("}")
	}
	j.raw("]}")
}

// writeTokenKey writes id's key of the legacy logprobs block as a JSON string.
func (s *Server) writeTokenKey(j *jw, id int32, asIDs bool) {
	if !asIDs {
		j.str(s.tokenKey(id, false))
		return
	}
	b := append(j.buf[:0], `"token_id:`...)
	b = strconv.AppendInt(b, int64(id), 10)
	j.buf = append(b, '"')
	j.bytes(j.buf)
}

// decimalLen is the number of characters of id in decimal.
func decimalLen(id int32) int {
	n := 1
	if id < 0 {
		n++
	}
	for v := int64(id); v >= 10 || v <= -10; v /= 10 {
		n++
	}
	return n
}

// contextTail is prompt followed by ids, keeping of prompt only the ids the model
// looks back at from ids[0]: the model's distribution at a position depends on the
// three ids before it only (see model.at), so that positions of ids are scored
// without copying a long prompt.
func contextTail(prompt, ids []int32) []int32 {
	keep := prompt[max(0, len(prompt)-contextLen):]
	return append(append(make([]int32, 0, len(keep)+len(ids)), keep...), ids...)
}

// chatLogprobs builds logprobs.content: per token, top_logprobs holds the sampled token
// first, then the best others, k items in all (as vLLM V1 takes them in dict order).
func (s *Server) chatLogprobs(c genChoice, k int) []chatLogprob {
	k = s.topK(k)
	seq := append(append([]int32(nil), c.prompt...), c.ids...)
	out := make([]chatLogprob, len(c.ids))
	lm := s.genModel(c.prompt)
	var top []int32
	for i, id := range c.ids {
		d := lm.at(seq, len(c.prompt)+i)
		tok := s.tokenKey(id, false)
		out[i] = chatLogprob{Token: tok, Logprob: clampLogprob(d.logprob(id)), Bytes: byteInts(tok), TopLogprobs: []chatTopLogprob{}}
		if k == 0 {
			continue
		}
		entries := []int32{id}
		top = d.topK(k, top[:0])
		for _, t := range top {
			if t != id {
				entries = append(entries, t)
			}
		}
		for _, t := range entries[:k] {
			ts := s.tokenKey(t, false)
			out[i].TopLogprobs = append(out[i].TopLogprobs, chatTopLogprob{Token: ts, Logprob: clampLogprob(d.logprob(t)), Bytes: byteInts(ts)})
		}
	}
	return out
}

func byteInts(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}
