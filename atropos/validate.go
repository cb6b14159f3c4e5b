package atropos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// ErrInvalidGroup is matched (errors.Is) by every error [ScoredDataGroup.Validate]
// returns.
var ErrInvalidGroup = errors.New("atropos: invalid group")

// InvalidGroupError describes the first problem Validate found in a group.
type InvalidGroupError struct {
	Field  string // JSON key, e.g. "masks"
	Seq    int    // sequence index, or -1
	Pos    int    // position index, or -1
	Reason string // what is wrong, in words
}

// Error names the field, its indexes and the problem.
func (e *InvalidGroupError) Error() string {
	at := e.Field
	if e.Seq >= 0 {
		at += fmt.Sprintf("[%d]", e.Seq)
	}
	if e.Pos >= 0 {
		at += fmt.Sprintf("[%d]", e.Pos)
	}
	return fmt.Sprintf("atropos: invalid group: %s: %s", at, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidGroup) true.
func (e *InvalidGroupError) Is(target error) bool { return target == ErrInvalidGroup }

// ValidateOptions configure [ScoredDataGroup.Validate]. The zero value checks the shape
// and values only.
type ValidateOptions struct {
	// MaxTokenLen, when positive, is the trainer's max_token_len: every sequence must be
	// strictly shorter (BaseEnv drops the whole group otherwise).
	MaxTokenLen int
	// GroupSize, when positive, is the env's group size: the group must have that many
	// sequences unless group_overrides.group_size says otherwise.
	GroupSize int
	// AllowNonPowerOfTwo accepts group sizes that are not powers of two. Upstream batch
	// formation assumes powers of two; other sizes may never form a batch.
	AllowNonPowerOfTwo bool
	// RequireInferenceLogprobs rejects groups without inference_logprobs: the reference
	// trainer crashes on a null value.
	RequireInferenceLogprobs bool
}

// Validate checks g before it is sent and returns an [*InvalidGroupError] for the first
// problem found:
//   - at least one sequence; tokens, masks, scores and every optional per-sequence field
//     have one entry per sequence; per-token fields (masks, inference_logprobs,
//     ref_logprobs, advantages, distill rows) one entry per token;
//   - masks are MaskIgnore or the token id; token ids are not negative;
//   - inference_logprobs are MaskedLogprob at masked positions and at most 0 at trained
//     positions;
//   - no NaN or ±Inf in any float, including inside generation_params, overrides and
//     group_overrides, which must also be encodable as JSON;
//   - distill ids are not negative, ids and logprobs parallel;
//   - every message is an object with "role" and "content" (the API answers 422
//     otherwise), and every overrides entry is a map, not nil (null gets 422 too);
//   - the group size rules and the length limit of opts.
func (g *ScoredDataGroup) Validate(opts ValidateOptions) error {
	bad := func(field string, seq, pos int, format string, args ...any) error {
		return &InvalidGroupError{Field: field, Seq: seq, Pos: pos, Reason: fmt.Sprintf(format, args...)}
	}
	N := len(g.Tokens)
	if N == 0 {
		return bad("tokens", -1, -1, "no sequences")
	}
	if len(g.Masks) != N {
		return bad("masks", -1, -1, "%d entries for %d sequences", len(g.Masks), N)
	}
	if len(g.Scores) != N {
		return bad("scores", -1, -1, "%d scores for %d sequences", len(g.Scores), N)
	}
	if err := g.validateSize(opts, bad); err != nil {
		return err
	}
	for i, s := range g.Scores {
		if !finite(s) {
			return bad("scores", i, -1, "%v is not a finite number", s)
		}
	}
	for i, toks := range g.Tokens {
		if len(toks) == 0 {
			return bad("tokens", i, -1, "empty sequence")
		}
		if opts.MaxTokenLen > 0 && len(toks) >= opts.MaxTokenLen {
			return bad("tokens", i, -1, "%d tokens, the trainer's max_token_len is %d: sequences must be shorter", len(toks), opts.MaxTokenLen)
		}
		if len(g.Masks[i]) != len(toks) {
			return bad("masks", i, -1, "%d masks for %d tokens", len(g.Masks[i]), len(toks))
		}
		for t, id := range toks {
			if id < 0 {
				return bad("tokens", i, t, "negative token id %d", id)
			}
			if m := g.Masks[i][t]; m != MaskIgnore && m != id {
				return bad("masks", i, t, "%d, want %d (not trained) or the token id %d", m, MaskIgnore, id)
			}
		}
	}
	if opts.RequireInferenceLogprobs && g.InferenceLogprobs == nil {
		return bad("inference_logprobs", -1, -1, "missing; the reference trainer needs it")
	}
	for _, f := range []struct {
		name string
		m    [][]float64
	}{{"inference_logprobs", g.InferenceLogprobs}, {"ref_logprobs", g.RefLogprobs}, {"advantages", g.Advantages}} {
		if err := g.validatePerToken(f.name, f.m, bad); err != nil {
			return err
		}
	}
	for i, row := range g.InferenceLogprobs {
		for t, lp := range row {
			masked := g.Masks[i][t] == MaskIgnore
			if masked && lp != MaskedLogprob {
				return bad("inference_logprobs", i, t, "%v at a masked position, want %v", lp, MaskedLogprob)
			}
			if !masked && lp > 0 {
				return bad("inference_logprobs", i, t, "%v at a trained position, want a logprob <= 0", lp)
			}
		}
	}
	if err := g.validateDistill(bad); err != nil {
		return err
	}
	if g.Messages != nil {
		if len(g.Messages) != N {
			return bad("messages", -1, -1, "%d entries for %d sequences", len(g.Messages), N)
		}
		for i, seq := range g.Messages {
			for j, raw := range seq {
				if err := checkMessage(raw); err != nil {
					return bad("messages", i, j, "%v", err)
				}
			}
		}
	}
	if g.Overrides != nil && len(g.Overrides) != N {
		return bad("overrides", -1, -1, "%d entries for %d sequences", len(g.Overrides), N)
	}
	for i, o := range g.Overrides {
		if o == nil {
			return bad("overrides", i, -1, "null, which the API refuses (422); use an empty map")
		}
		if err := checkFreeForm(o); err != nil {
			return bad("overrides", i, -1, "%v", err)
		}
	}
	if err := checkFreeForm(g.GenerationParams); err != nil {
		return bad("generation_params", -1, -1, "%v", err)
	}
	if err := checkFreeForm(g.GroupOverrides); err != nil {
		return bad("group_overrides", -1, -1, "%v", err)
	}
	if len(g.Images) > 0 && !json.Valid(g.Images) {
		return bad("images", -1, -1, "not valid JSON")
	}
	return nil
}

type badFunc func(field string, seq, pos int, format string, args ...any) error

func (g *ScoredDataGroup) validateSize(opts ValidateOptions, bad badFunc) error {
	N := len(g.Tokens)
	want := opts.GroupSize
	if v, ok := g.GroupOverrides["group_size"]; ok {
		f, isNum := v.(float64)
		if n, isInt := v.(int); isInt {
			f, isNum = float64(n), true
		}
		if !isNum || f != math.Trunc(f) || f < 1 {
			return bad("group_overrides", -1, -1, "group_size %v is not a positive integer", v)
		}
		want = int(f)
	}
	if want > 0 && N != want {
		return bad("tokens", -1, -1, "%d sequences, the group size is %d (set group_overrides.group_size to send another size)", N, want)
	}
	if !opts.AllowNonPowerOfTwo && N&(N-1) != 0 {
		return bad("tokens", -1, -1, "%d sequences is not a power of two; batches may never form (set AllowNonPowerOfTwo to send it anyway)", N)
	}
	return nil
}

func (g *ScoredDataGroup) validatePerToken(name string, m [][]float64, bad badFunc) error {
	if m == nil {
		return nil
	}
	if len(m) != len(g.Tokens) {
		return bad(name, -1, -1, "%d entries for %d sequences", len(m), len(g.Tokens))
	}
	for i, row := range m {
		if len(row) != len(g.Tokens[i]) {
			return bad(name, i, -1, "%d values for %d tokens", len(row), len(g.Tokens[i]))
		}
		for t, v := range row {
			if !finite(v) {
				return bad(name, i, t, "%v is not a finite number", v)
			}
		}
	}
	return nil
}

func (g *ScoredDataGroup) validateDistill(bad badFunc) error {
	if g.Distill == nil {
		return nil
	}
	if len(g.Distill) != len(g.Tokens) {
		return bad("distill_token_ids", -1, -1, "%d entries for %d sequences", len(g.Distill), len(g.Tokens))
	}
	for i, r := range g.Distill {
		if r == nil {
			return bad("distill_token_ids", i, -1, "nil rows (use NewDistillRows for a sequence without teacher data)")
		}
		if r.Len() != len(g.Tokens[i]) {
			return bad("distill_token_ids", i, -1, "%d rows for %d tokens: one row per token", r.Len(), len(g.Tokens[i]))
		}
		if len(r.ids) != len(r.lps) {
			return bad("distill_logprobs", i, -1, "%d ids but %d logprobs", len(r.ids), len(r.lps))
		}
		for pos := range r.Len() {
			ids, lps := r.Row(pos)
			for k, id := range ids {
				if id < 0 {
					return bad("distill_token_ids", i, pos, "negative token id %d", id)
				}
				if !finite(float64(lps[k])) {
					return bad("distill_logprobs", i, pos, "%v is not a finite number", lps[k])
				}
			}
		}
	}
	return nil
}

func checkMessage(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if _, ok := m["role"]; !ok {
		return errors.New(`message has no "role"`)
	}
	if _, ok := m["content"]; !ok {
		return errors.New(`message has no "content"`)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// checkFreeForm checks a free-form value (generation_params, overrides): no NaN or ±Inf,
// named by its path when the value is made of maps, []any and floats, and encodable by
// encoding/json whatever its types.
func checkFreeForm(v any) error {
	if err := finiteValue(v); err != nil {
		return err
	}
	if _, err := json.Marshal(v); err != nil {
		var uv *json.UnsupportedValueError
		if errors.As(err, &uv) {
			return fmt.Errorf("%w: %v", ErrNonFinite, err)
		}
		return err
	}
	return nil
}

// finiteValue walks a free-form value and reports the first NaN or ±Inf.
func finiteValue(v any) error {
	switch v := v.(type) {
	case float64:
		if !finite(v) {
			return fmt.Errorf("%w: %v", ErrNonFinite, v)
		}
	case float32:
		if !finite(float64(v)) {
			return fmt.Errorf("%w: %v", ErrNonFinite, v)
		}
	case map[string]any:
		for k, x := range v {
			if err := finiteValue(x); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
	case []any:
		for i, x := range v {
			if err := finiteValue(x); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case []float64:
		for i, x := range v {
			if !finite(x) {
				return fmt.Errorf("[%d]: %w: %v", i, ErrNonFinite, x)
			}
		}
	}
	return nil
}
