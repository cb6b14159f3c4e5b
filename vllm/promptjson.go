package vllm

import "strconv"

// promptIDs is a token-id prompt, encoded without reflection: a prompt holds up to
// the model's context length of ids and is sent again at every turn of an episode.
type promptIDs []int32

// MarshalJSON writes the ids as a JSON array of integers.
func (p promptIDs) MarshalJSON() ([]byte, error) {
	return appendIDs(make([]byte, 0, 7*len(p)+2), p), nil
}

// promptBatch is a batch of token-id prompts.
type promptBatch [][]int32

// MarshalJSON writes the prompts as a JSON array of arrays of integers.
func (b promptBatch) MarshalJSON() ([]byte, error) {
	n := 2
	for _, p := range b {
		n += 7*len(p) + 3
	}
	out := append(make([]byte, 0, n), '[')
	for i, p := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendIDs(out, p)
	}
	return append(out, ']'), nil
}

func appendIDs(dst []byte, ids []int32) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}
