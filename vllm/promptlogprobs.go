package vllm

import (
	"fmt"
	"slices"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// NegInfLogprob is the value vLLM writes for a logprob of −∞ (JSON has no infinity).
// The client keeps it as the finite value it is on the wire rather than turning it into
// float32(-Inf): Atropos refuses non-finite numbers, and any logprob ≤ NegInfLogprob
// means "probability zero" to every consumer in this library.
const NegInfLogprob = -9999

// IsNegInf reports whether lp stands for a logprob of −∞ (lp ≤ [NegInfLogprob]).
func IsNegInf(lp float32) bool { return lp <= NegInfLogprob }

// PromptLogprobs is one choice's "prompt_logprobs", decoded into flat arrays: no map and
// no string per position. Position j's entries are IDs[Offsets[j]:Offsets[j+1]] (and the
// same range of Logprobs and Ranks), in the server's order. Position 0, which vLLM
// always sends as null, has no entries; so has any other null position.
//
// An entry set holds the top-k tokens (ranks 1…k) plus the actual prompt token when it
// is not among them (then with its true rank > k): k or k+1 entries. decoded_token
// strings are not kept: tokens are identified by id only.
type PromptLogprobs struct {
	// Offsets has Len()+1 entries.
	Offsets []int32
	// IDs are the token ids (the JSON keys, parsed).
	IDs []int32
	// Logprobs are as sent; NegInfLogprob stands for −∞.
	Logprobs []float32
	// Ranks are the 1-based vocabulary ranks, 0 where the server sent null.
	Ranks []int32
}

// Len returns the number of prompt positions.
func (p *PromptLogprobs) Len() int {
	if p == nil || len(p.Offsets) == 0 {
		return 0
	}
	return len(p.Offsets) - 1
}

// Entries returns position j's entries, in the server's order.
func (p *PromptLogprobs) Entries(j int) (ids []int32, logprobs []float32, ranks []int32) {
	lo, hi := p.Offsets[j], p.Offsets[j+1]
	return p.IDs[lo:hi], p.Logprobs[lo:hi], p.Ranks[lo:hi]
}

// Lookup returns the logprob and rank of token id at position j; ok is false when the
// server did not send that id there.
func (p *PromptLogprobs) Lookup(j int, id int32) (logprob float32, rank int32, ok bool) {
	lo, hi := p.Offsets[j], p.Offsets[j+1]
	for e := lo; e < hi; e++ {
		if p.IDs[e] == id {
			return p.Logprobs[e], p.Ranks[e], true
		}
	}
	return 0, 0, false
}

// AppendTopK appends position j's top-k entries, most likely first, to ids and
// logprobs. The order comes from the ranks 1…k, never from key order; when the server
// sent no ranks, entries are ordered by logprob instead. Fewer than k entries are
// appended when the server sent fewer.
//
// Ranks are not trusted to be unique. vLLM V1 ranks the actual prompt token by
// counting the tokens whose logprob is at least its own, so outside the top-k it gets
// a rank above k even when tied with a top-k member; other servers (or versions) may
// count only strictly greater logprobs, and then a tied token shares a top-k rank.
// Tied entries keep the server's order and the first k are taken; they have equal
// logprobs, so the result is a top-k set either way.
//
// It fails when k < 1 or j is not a position.
func (p *PromptLogprobs) AppendTopK(j, k int, ids []int32, logprobs []float32) ([]int32, []float32, error) {
	if k < 1 || j < 0 || j >= p.Len() {
		return ids, logprobs, fmt.Errorf("vllm: top-%d at position %d of %d", k, j, p.Len())
	}
	lo, hi := int(p.Offsets[j]), int(p.Offsets[j+1])
	if hi-lo > 256 {
		ids, logprobs = p.appendTopKSorted(j, k, ids, logprobs)
		return ids, logprobs, nil
	}
	var idx [256]int32 // entry indexes of the chosen entries, by rank
	n := 0
	for e := lo; e < hi; e++ {
		r := int(p.Ranks[e])
		if r == 0 {
			ids, logprobs = p.appendTopKSorted(j, k, ids, logprobs)
			return ids, logprobs, nil
		}
		if r > k {
			continue
		}
		// stable insertion by rank; entries arrive almost sorted
		i := n
		for i > 0 && p.Ranks[idx[i-1]] > int32(r) {
			idx[i] = idx[i-1]
			i--
		}
		idx[i] = int32(e)
		n++
	}
	for _, e := range idx[:min(n, k)] {
		ids = append(ids, p.IDs[e])
		logprobs = append(logprobs, p.Logprobs[e])
	}
	return ids, logprobs, nil
}

// appendTopKSorted is the general path: sort the position's entries by rank (or by
// logprob when a rank is missing).
func (p *PromptLogprobs) appendTopKSorted(j, k int, ids []int32, logprobs []float32) ([]int32, []float32) {
	lo, hi := int(p.Offsets[j]), int(p.Offsets[j+1])
	order := make([]int, 0, hi-lo)
	byRank := true
	for e := lo; e < hi; e++ {
		order = append(order, e)
		if p.Ranks[e] == 0 {
			byRank = false
		}
	}
	if byRank {
		slices.SortStableFunc(order, func(a, b int) int { return int(p.Ranks[a]) - int(p.Ranks[b]) })
	} else {
		slices.SortStableFunc(order, func(a, b int) int {
			switch la, lb := p.Logprobs[a], p.Logprobs[b]; {
			case la > lb:
				return -1
			case la < lb:
				return 1
			}
			return 0
		})
	}
	for i, e := range order {
		if i == k || (byRank && int(p.Ranks[e]) > k) {
			break
		}
		ids = append(ids, p.IDs[e])
		logprobs = append(logprobs, p.Logprobs[e])
	}
	return ids, logprobs
}

// decodePromptLogprobs reads a prompt_logprobs value (null or a list) from s into p,
// reusing p's arrays.
//
// It reads the list as Scanner.Array does, but without having a streaming scanner
// make each position readable whole first: that is a second pass over the bytes, and
// the position (a few KB) is most often in the window already. decodePosition reads
// one that is not with the general path, which reads on.
func decodePromptLogprobs(s *jsonscan.Scanner, p *PromptLogprobs) error {
	return decodePositions(s, p, true)
}

// decodePositions is decodePromptLogprobs; with fast false, every position and entry
// takes the general path (for the tests that compare the two).
func decodePositions(s *jsonscan.Scanner, p *PromptLogprobs, fast bool) error {
	p.Offsets = append(p.Offsets[:0], 0)
	p.IDs, p.Logprobs, p.Ranks = p.IDs[:0], p.Logprobs[:0], p.Ranks[:0]
	if s.Null() {
		p.Offsets = p.Offsets[:0]
		return nil
	}
	s.Fill()
	if err := s.Expect('['); err != nil {
		return err
	}
	for j := 0; ; j++ {
		s.Fill()
		if j == 0 && s.Consume(']') {
			return nil
		}
		p.grow()
		if err := decodePosition(s, p, fast); err != nil {
			return fmt.Errorf("prompt_logprobs[%d]: %w", j, err)
		}
		p.Offsets = append(p.Offsets, int32(len(p.IDs)))
		s.Fill()
		if s.Consume(',') {
			continue
		}
		return s.Expect(']')
	}
}

// decodeOptPromptLogprobs reads a prompt_logprobs value that may be null (then nil).
func decodeOptPromptLogprobs(s *jsonscan.Scanner) (*PromptLogprobs, error) {
	if s.Null() {
		return nil, nil
	}
	p := &PromptLogprobs{}
	return p, decodePromptLogprobs(s, p)
}

// grow makes room for at least 256 more entries and one more position, doubling
// capacity (append alone grows large slices by a quarter, copying far more).
func (p *PromptLogprobs) grow() {
	if cap(p.IDs)-len(p.IDs) < 256 {
		n := max(cap(p.IDs), 1024)
		p.IDs = slices.Grow(p.IDs, n)
		p.Logprobs = slices.Grow(p.Logprobs, n)
		p.Ranks = slices.Grow(p.Ranks, n)
	}
	if cap(p.Offsets) == len(p.Offsets) {
		p.Offsets = slices.Grow(p.Offsets, max(cap(p.Offsets), 256))
	}
}

// decodePosition reads null or {"<id>": {"logprob": f, "rank": r, "decoded_token": s}, …}.
// A position written as vLLM writes it is read by fastPosition, without the scanner's
// calls, when it is in Data whole (always in memory; in a streaming scanner's window,
// all but the positions that the window's end cuts); the general path below reads any
// other, reading on in a stream (an object of up to 16 KiB whole, a longer one member
// by member).
func decodePosition(s *jsonscan.Scanner, p *PromptLogprobs, fast bool) error {
	s.WS()
	if fast && s.Pos < len(s.Data) && s.Data[s.Pos] == '{' {
		if end, ok := fastPosition(s.Data, s.Pos, p); ok {
			s.Pos = end
			return nil
		}
	}
	return s.Object(true, func(k []byte) error {
		id, err := jsonscan.ParseInt32(k)
		if err != nil || id < 0 {
			return fmt.Errorf("key %q is not a token id", k)
		}
		lp, rank, err := decodeEntry(s, fast)
		if err != nil {
			return fmt.Errorf("token %d: %w", id, err)
		}
		p.IDs = append(p.IDs, id)
		p.Logprobs = append(p.Logprobs, lp)
		p.Ranks = append(p.Ranks, rank)
		if len(p.IDs) > 1<<31-2 {
			return fmt.Errorf("too many entries")
		}
		return nil
	})
}

// decodeEntry reads one {"logprob": f, "rank": r|null, "decoded_token": s|null}, for
// the general path of decodePosition: an entry written as vLLM writes it is read by
// fastEntry; for any other it tries the two keys it needs as literal bytes before
// reading a key in general.
func decodeEntry(s *jsonscan.Scanner, fast bool) (lp float32, rank int32, err error) {
	s.Buffer() // read whole when streamed: the loop below reads within the value
	if fast {
		s.WS()
		if lp, rank, end, ok := fastEntry(s.Data, s.Pos); ok {
			s.Pos = end
			return lp, rank, nil
		}
	}
	if err := s.Expect('{'); err != nil {
		return 0, 0, err
	}
	seenLP := false
	if !s.Consume('}') {
		for {
			var field string
			switch {
			case s.KnownKey(`"logprob":`):
				field = "logprob"
			case s.KnownKey(`"rank":`):
				field = "rank"
			default:
				k, err := s.Key()
				if err != nil {
					return 0, 0, err
				}
				field = string(k)
			}
			switch field {
			case "logprob":
				if lp, err = s.Float32(); err != nil {
					return 0, 0, err
				}
				seenLP = true
			case "rank":
				if !s.Null() {
					if rank, err = s.Int32(); err != nil {
						return 0, 0, err
					}
					if rank < 1 {
						return 0, 0, fmt.Errorf("rank %d, want ≥ 1", rank)
					}
				}
			default: // decoded_token and anything newer
				if _, err := s.Skip(); err != nil {
					return 0, 0, err
				}
			}
			if s.Consume(',') {
				continue
			}
			if err := s.Expect('}'); err != nil {
				return 0, 0, err
			}
			break
		}
	}
	if !seenLP {
		return 0, 0, fmt.Errorf("no logprob")
	}
	return lp, rank, nil
}

// DecodePromptLogprobs decodes a prompt_logprobs JSON value (null, or a list whose
// elements are null or objects keyed by token-id strings) into flat arrays.
func DecodePromptLogprobs(data []byte) (*PromptLogprobs, error) {
	s := &jsonscan.Scanner{Data: data}
	p := &PromptLogprobs{}
	if err := decodePromptLogprobs(s, p); err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	if err := s.End(); err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	return p, nil
}
