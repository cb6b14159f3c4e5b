package atropos

import (
	"encoding/json"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
)

// MaskIgnore is the label of a position that is not trained on, in [ScoredDataGroup.Masks].
const MaskIgnore = -100

// MaskedLogprob is the inference logprob Atropos puts at masked positions (an impossible
// logprob used as a sentinel), in [ScoredDataGroup.InferenceLogprobs].
const MaskedLogprob = 1.0

// ScoredDataGroup is one group of sequences produced from one item, with one score each:
// the API's ScoredData with its 14 keys. The JSON encoding always writes all 14 keys, in
// the order below, with null for absent optional fields, as the API re-serialises them.
//
// Nil optional fields encode as null. Distill rows are held compactly ([DistillRows]);
// Distill is nil when the group carries no distillation data (both keys null) and
// otherwise holds one entry per sequence.
//
// Messages are kept as raw JSON objects, one per message, so that groups read back from
// the API or from files keep every field (content parts, "reward") unchanged. Use
// [Sequence.Messages] with [chat.Message] values to build them, and
// [ScoredDataGroup.ChatMessages] to read them back as [chat.Message].
type ScoredDataGroup struct {
	Tokens            [][]int             // "tokens": [N][L_i] token ids
	Masks             [][]int             // "masks": [N][L_i], MaskIgnore or the token id
	Scores            []float64           // "scores": [N]
	Advantages        [][]float64         // "advantages": optional [N][L_i]
	RefLogprobs       [][]float64         // "ref_logprobs": optional [N][L_i]
	Messages          [][]json.RawMessage // "messages": optional [N][messages]
	GenerationParams  map[string]any      // "generation_params": optional
	InferenceLogprobs [][]float64         // "inference_logprobs": optional [N][L_i], MaskedLogprob at masked positions
	Overrides         []map[string]any    // "overrides": optional [N]
	GroupOverrides    map[string]any      // "group_overrides": optional
	Images            json.RawMessage     // "images": optional, opaque
	EnvID             *int                // "env_id": set by the client when sending
	Distill           []*DistillRows      // "distill_token_ids" + "distill_logprobs": optional [N]
}

// Sequence is one sequence of a group, as an env builds it. See [ScoredDataGroup.Add].
type Sequence struct {
	// Tokens are the sequence's token ids.
	Tokens []int
	// Masks are aligned with Tokens: MaskIgnore where the token is not trained on,
	// else the token id.
	Masks []int
	// Score is the sequence's reward.
	Score float64
	// InferenceLogprobs are the sampling logprobs aligned with Tokens, MaskedLogprob at
	// masked positions. Nil when the sequence has none.
	InferenceLogprobs []float64
	// Messages is the conversation of the sequence; nil for none.
	Messages []chat.Message
	// RefLogprobs are optional per-token reference logprobs, aligned with Tokens.
	RefLogprobs []float64
	// Advantages are optional per-token advantages, aligned with Tokens.
	Advantages []float64
	// Overrides are optional per-sequence knobs ("set_advantage_to_zero", "temperature").
	Overrides map[string]any
	// Distill holds the teacher rows; nil when the sequence has none (all rows empty).
	Distill *DistillRows
}

// Len returns the number of sequences in g.
func (g *ScoredDataGroup) Len() int { return len(g.Tokens) }

// Add appends one sequence to g. The slices are stored, not copied.
//
// The per-token fields (inference_logprobs, ref_logprobs, advantages) are all or none
// for a group: absent means null for the whole group, and Add refuses a sequence that
// has one of them when earlier sequences did not, or lacks one the earlier sequences
// had ([ScoredDataGroup.Validate] would refuse such a group anyway: an empty list is
// not one value per token). The other optional fields stay nil until some sequence sets
// them; then the earlier sequences get empty values (empty message lists, empty
// override objects, all-empty distill rows) so that every field keeps one entry per
// sequence. Add returns an error, and leaves g unchanged, when the sequence's per-token
// arrays differ in length from its tokens, mix presence as above, or a message cannot
// be encoded.
func (g *ScoredDataGroup) Add(s Sequence) error {
	L := len(s.Tokens)
	if len(s.Masks) != L {
		return fmt.Errorf("atropos: Add: %d masks for %d tokens", len(s.Masks), L)
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"inference_logprobs", s.InferenceLogprobs}, {"ref_logprobs", s.RefLogprobs}, {"advantages", s.Advantages}} {
		if f.v != nil && len(f.v) != L {
			return fmt.Errorf("atropos: Add: %d %s for %d tokens", len(f.v), f.name, L)
		}
	}
	if n := len(g.Tokens); n > 0 {
		for _, f := range []struct {
			name     string
			has, had bool
		}{
			{"inference_logprobs", s.InferenceLogprobs != nil, g.InferenceLogprobs != nil},
			{"ref_logprobs", s.RefLogprobs != nil, g.RefLogprobs != nil},
			{"advantages", s.Advantages != nil, g.Advantages != nil},
		} {
			switch {
			case f.has && !f.had:
				return fmt.Errorf("atropos: Add: sequence %d has %s and the earlier ones have none: give every sequence of a group %s, or none", n, f.name, f.name)
			case !f.has && f.had:
				return fmt.Errorf("atropos: Add: sequence %d has no %s and the earlier ones have: give every sequence of a group %s, or none", n, f.name, f.name)
			}
		}
	}
	if s.Distill != nil && s.Distill.Len() != L {
		return fmt.Errorf("atropos: Add: %d distill rows for %d tokens", s.Distill.Len(), L)
	}
	var msgs []json.RawMessage
	if s.Messages != nil {
		msgs = make([]json.RawMessage, len(s.Messages))
		for i, m := range s.Messages {
			b, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("atropos: Add: message %d: %w", i, err)
			}
			msgs[i] = b
		}
	}
	n := len(g.Tokens)
	floats := func() []float64 { return []float64{} }
	g.InferenceLogprobs = addOptional(g.InferenceLogprobs, n, s.InferenceLogprobs, s.InferenceLogprobs != nil, floats)
	g.RefLogprobs = addOptional(g.RefLogprobs, n, s.RefLogprobs, s.RefLogprobs != nil, floats)
	g.Advantages = addOptional(g.Advantages, n, s.Advantages, s.Advantages != nil, floats)
	g.Messages = addOptional(g.Messages, n, msgs, msgs != nil, func() []json.RawMessage { return []json.RawMessage{} })
	g.Overrides = addOptional(g.Overrides, n, s.Overrides, s.Overrides != nil, func() map[string]any { return map[string]any{} })
	if s.Distill != nil || g.Distill != nil {
		if g.Distill == nil {
			g.Distill = make([]*DistillRows, n)
			for i := range n {
				g.Distill[i] = NewDistillRows(len(g.Tokens[i]))
			}
		}
		d := s.Distill
		if d == nil {
			d = NewDistillRows(L)
		}
		g.Distill = append(g.Distill, d)
	}
	g.Tokens = append(g.Tokens, s.Tokens)
	g.Masks = append(g.Masks, s.Masks)
	g.Scores = append(g.Scores, s.Score)
	return nil
}

// addOptional appends v to the optional per-sequence list cur, which holds n entries or
// is nil. present says whether the sequence set the field; empty makes a fresh empty value.
func addOptional[T any](cur []T, n int, v T, present bool, empty func() T) []T {
	if !present && cur == nil {
		return nil
	}
	if cur == nil {
		cur = make([]T, n, n+1)
		for i := range cur {
			cur[i] = empty()
		}
	}
	if !present {
		v = empty()
	}
	return append(cur, v)
}

// DistillRow returns the teacher row of sequence seq at position pos, empty when the
// group has no distill data or the position was not scored. The slices alias the group's
// storage. DistillRow panics when seq or pos is out of range.
func (g *ScoredDataGroup) DistillRow(seq, pos int) (ids []int32, lps []float32) {
	if g.Distill == nil {
		_ = g.Tokens[seq][pos]
		return nil, nil
	}
	return g.Distill[seq].Row(pos)
}

// ChatMessages decodes the messages of sequence seq as [chat.Message] values. Fields
// chat.Message has no room for (content parts, "reward") are dropped; it returns nil
// when the group has no messages.
func (g *ScoredDataGroup) ChatMessages(seq int) ([]chat.Message, error) {
	if g.Messages == nil {
		return nil, nil
	}
	out := make([]chat.Message, len(g.Messages[seq]))
	for i, raw := range g.Messages[seq] {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("atropos: messages[%d][%d]: %w", seq, i, err)
		}
	}
	return out, nil
}

// ScoresEqual reports whether all scores of g are equal (always true for fewer than two
// sequences). BaseEnv drops such groups when ensure_scores_are_not_same is set.
func (g *ScoredDataGroup) ScoresEqual() bool {
	for _, s := range g.Scores {
		if s != g.Scores[0] {
			return false
		}
	}
	return true
}

// Sequences returns the total number of sequences in groups.
func Sequences(groups ...*ScoredDataGroup) int {
	n := 0
	for _, g := range groups {
		n += g.Len()
	}
	return n
}
