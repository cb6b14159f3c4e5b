package atropos

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrSyntax reports JSON that is not a valid group.
var ErrSyntax = errors.New("atropos: malformed group JSON")

// UnmarshalJSON decodes one group. Distill rows are decoded straight into their compact
// form, without nested slices. Unknown keys are ignored, as the API ignores them; missing
// optional keys and null mean absent. Numbers in integer fields may be written as
// integral floats ("7.0"), as Python writers sometimes do. Errors match [ErrSyntax].
// NaN and Infinity are refused with an error that also matches [ErrNonFinite]; distill
// arrays whose ids and logprobs differ in shape are refused too.
func (g *ScoredDataGroup) UnmarshalJSON(data []byte) error {
	s := newScanner(data)
	var out ScoredDataGroup
	if err := s.group(&out); err != nil {
		return err
	}
	s.WS()
	if s.Pos != len(s.Data) {
		return s.errorf("unexpected data after the group")
	}
	*g = out
	return nil
}

// group reads a whole group object into g.
func (s *scanner) group(g *ScoredDataGroup) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	var ids, lps []*DistillRows
	var haveIDs, haveLps bool
	if s.Peek() == '}' {
		s.Pos++
		return s.errorf("empty object: tokens, masks and scores are required")
	}
	seen := map[string]bool{}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		s.path = key
		seen[key] = true
		switch key {
		case "tokens":
			g.Tokens, err = s.intMatrix()
		case "masks":
			g.Masks, err = s.intMatrix()
		case "scores":
			g.Scores, err = s.floats()
		case "advantages":
			g.Advantages, err = s.floatMatrix()
		case "ref_logprobs":
			g.RefLogprobs, err = s.floatMatrix()
		case "inference_logprobs":
			g.InferenceLogprobs, err = s.floatMatrix()
		case "messages":
			g.Messages, err = s.messages()
		case "generation_params":
			g.GenerationParams, err = s.object()
		case "group_overrides":
			g.GroupOverrides, err = s.object()
		case "overrides":
			g.Overrides, err = s.objects()
		case "images":
			g.Images, err = s.rawOrNil()
		case "env_id":
			g.EnvID, err = s.optInt()
		case "distill_token_ids":
			ids, haveIDs, err = s.distill(false)
		case "distill_logprobs":
			lps, haveLps, err = s.distill(true)
		default:
			_, err = s.skip()
		}
		if err != nil {
			return err
		}
		s.path = ""
		switch s.Peek() {
		case ',':
			s.Pos++
			continue
		case '}':
			s.Pos++
		case 0:
			return s.errorf("unexpected end inside the group")
		default:
			return s.errorf("want ',' or '}' after a value")
		}
		break
	}
	for _, k := range []string{"tokens", "masks", "scores"} {
		if !seen[k] {
			return s.errorf("missing required key %q", k)
		}
	}
	if g.Tokens == nil || g.Masks == nil || g.Scores == nil {
		return s.errorf("tokens, masks and scores must not be null")
	}
	d, err := mergeDistill(ids, lps, haveIDs, haveLps)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	g.Distill = d
	return nil
}

// mergeDistill joins separately decoded id and logprob rows into one compact form.
func mergeDistill(ids, lps []*DistillRows, haveIDs, haveLps bool) ([]*DistillRows, error) {
	if !haveIDs && !haveLps {
		return nil, nil
	}
	if haveIDs != haveLps {
		return nil, errors.New("distill_token_ids and distill_logprobs must be both null or both set")
	}
	if len(ids) != len(lps) {
		return nil, fmt.Errorf("distill_token_ids has %d sequences, distill_logprobs %d", len(ids), len(lps))
	}
	for i := range ids {
		a, b := ids[i], lps[i]
		if a.Len() != b.Len() {
			return nil, fmt.Errorf("distill sequence %d: %d id rows, %d logprob rows", i, a.Len(), b.Len())
		}
		for pos := range a.n {
			if a.n[pos] != b.n[pos] {
				return nil, fmt.Errorf("distill_token_ids[%d][%d] has %d ids, distill_logprobs %d logprobs", i, pos, a.n[pos], b.n[pos])
			}
		}
		a.lps = b.lps
	}
	return ids, nil
}

func (s *scanner) intMatrix() ([][]int, error) {
	if s.Null() {
		return nil, nil
	}
	out := [][]int{}
	err := s.list(func(int) error {
		row := []int{}
		err := s.list(func(int) error {
			v, err := s.int()
			row = append(row, int(v))
			return err
		})
		out = append(out, row)
		return err
	})
	return out, err
}

func (s *scanner) floats() ([]float64, error) {
	if s.Null() {
		return nil, nil
	}
	row := []float64{}
	err := s.list(func(int) error {
		v, err := s.float(64)
		row = append(row, v)
		return err
	})
	return row, err
}

func (s *scanner) floatMatrix() ([][]float64, error) {
	if s.Null() {
		return nil, nil
	}
	out := [][]float64{}
	err := s.list(func(int) error {
		row, err := s.floats()
		if row == nil && err == nil {
			return s.errorf("null row")
		}
		out = append(out, row)
		return err
	})
	return out, err
}

func (s *scanner) messages() ([][]json.RawMessage, error) {
	if s.Null() {
		return nil, nil
	}
	out := [][]json.RawMessage{}
	err := s.list(func(int) error {
		seq := []json.RawMessage{}
		err := s.list(func(int) error {
			if s.Peek() != '{' {
				return s.errorf("a message must be an object")
			}
			raw, err := s.skip()
			seq = append(seq, append(json.RawMessage(nil), raw...))
			return err
		})
		out = append(out, seq)
		return err
	})
	return out, err
}

func (s *scanner) object() (map[string]any, error) {
	if s.Null() {
		return nil, nil
	}
	if s.Peek() != '{' {
		return nil, s.errorf("want an object")
	}
	raw, err := s.skip()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, s.errorf("%v", err)
	}
	return m, nil
}

func (s *scanner) objects() ([]map[string]any, error) {
	if s.Null() {
		return nil, nil
	}
	out := []map[string]any{}
	err := s.list(func(int) error {
		m, err := s.object()
		if m == nil && err == nil {
			m = map[string]any{}
		}
		out = append(out, m)
		return err
	})
	return out, err
}

func (s *scanner) rawOrNil() (json.RawMessage, error) {
	if s.Null() {
		return nil, nil
	}
	raw, err := s.skip()
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), raw...), nil
}

func (s *scanner) optInt() (*int, error) {
	if s.Null() {
		return nil, nil
	}
	v, err := s.int()
	if err != nil {
		return nil, err
	}
	if v != int64(int(v)) {
		return nil, s.errorf("integer out of range")
	}
	n := int(v)
	return &n, nil
}

// distill reads distill_token_ids (logprobs false) or distill_logprobs (true) into
// compact rows.
func (s *scanner) distill(logprobs bool) ([]*DistillRows, bool, error) {
	if s.Null() {
		return nil, false, nil
	}
	out := []*DistillRows{}
	err := s.list(func(int) error {
		r := &DistillRows{}
		out = append(out, r)
		return s.list(func(pos int) error {
			r.appendPos()
			return s.list(func(int) error {
				r.n[pos]++
				if logprobs {
					f, err := s.float(32)
					if err != nil {
						return err
					}
					r.lps = append(r.lps, float32(f))
					return nil
				}
				v, err := s.int()
				if err != nil {
					return err
				}
				if v != int64(int32(v)) {
					return s.errorf("token id %d out of int32 range", v)
				}
				r.ids = append(r.ids, int32(v))
				return nil
			})
		})
	})
	return out, true, err
}
