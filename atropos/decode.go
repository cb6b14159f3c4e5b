package atropos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrSyntax reports JSON that is not a valid group.
var ErrSyntax = errors.New("atropos: malformed group JSON")

// UnmarshalJSON decodes one group. Distill rows are decoded straight into their compact
// form, without nested slices. Unknown keys are ignored, as the API ignores them; missing
// optional keys and null mean absent. Numbers in integer fields may be written as
// integral floats ("7.0"), as Python writers sometimes do. NaN, Infinity, and distill
// arrays whose ids and logprobs differ in shape are errors.
func (g *ScoredDataGroup) UnmarshalJSON(data []byte) error {
	s := scanner{data: data}
	var out ScoredDataGroup
	if err := s.group(&out); err != nil {
		return err
	}
	s.ws()
	if s.pos != len(s.data) {
		return s.errorf("unexpected data after the group")
	}
	*g = out
	return nil
}

// scanner is a small JSON reader specialised for groups.
type scanner struct {
	data []byte
	pos  int
	path string // current top-level key, for errors
}

func (s *scanner) errorf(format string, args ...any) error {
	where := ""
	if s.path != "" {
		where = " in " + strconv.Quote(s.path)
	}
	return fmt.Errorf("%w: offset %d%s: %s", ErrSyntax, s.pos, where, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if got := s.peek(); got != c {
		if got == 0 {
			return s.errorf("unexpected end, want %q", c)
		}
		return s.errorf("found %q, want %q", got, c)
	}
	s.pos++
	return nil
}

// null consumes a null literal if one is next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.data)-s.pos >= 4 && string(s.data[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// list iterates over the elements of a JSON array, calling elem for each.
func (s *scanner) list(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		case 0:
			return s.errorf("unexpected end inside an array")
		default:
			return s.errorf("want ',' or ']' in array")
		}
	}
}

// str reads a JSON string.
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", s.errorf("want a string")
	}
	start := s.pos
	s.pos++
	escaped := false
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == '\\':
			escaped = true
			s.pos += 2
			continue
		case c == '"':
			s.pos++
			raw := s.data[start:s.pos]
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return "", s.errorf("bad string: %v", err)
			}
			return out, nil
		case c < 0x20:
			return "", s.errorf("control character in string")
		}
		s.pos++
	}
	return "", s.errorf("unterminated string")
}

// number returns the bytes of the next JSON number.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.pos++
			continue
		}
		break
	}
	if start == s.pos || (s.pos-start == 1 && s.data[start] == '-') {
		if s.pos < len(s.data) && (s.data[s.pos] == 'N' || s.data[s.pos] == 'I') {
			return nil, s.errorf("%v", ErrNonFinite)
		}
		return nil, s.errorf("want a number")
	}
	return s.data[start:s.pos], nil
}

// int reads an integer; integral floats are accepted.
func (s *scanner) int() (int64, error) {
	b, err := s.number()
	if err != nil {
		return 0, err
	}
	isInt := true
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' || c == '+' {
			isInt = false
			break
		}
	}
	if isInt && len(b) < 19 {
		// Fast path: plain decimal without overflow risk.
		neg := b[0] == '-'
		d := b
		if neg {
			d = b[1:]
		}
		if len(d) == 0 || (len(d) > 1 && d[0] == '0') {
			return 0, s.errorf("bad integer %q", b)
		}
		var v int64
		for _, c := range d {
			if c < '0' || c > '9' {
				return 0, s.errorf("bad integer %q", b)
			}
			v = v*10 + int64(c-'0')
		}
		if neg {
			v = -v
		}
		return v, nil
	}
	if isInt {
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return 0, s.errorf("bad integer %q", b)
		}
		return v, nil
	}
	f, err := parseFloat(b, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, s.errorf("want an integer, found %q", b)
	}
	return int64(f), nil
}

func (s *scanner) float(bits int) (float64, error) {
	b, err := s.number()
	if err != nil {
		return 0, err
	}
	f, err := parseFloat(b, bits)
	if err != nil {
		return 0, s.errorf("bad number %q", b)
	}
	return f, nil
}

// parseFloat parses a JSON number, rejecting forms strconv accepts but JSON does not
// and values that overflow to ±Inf at the given bit size.
func parseFloat(b []byte, bits int) (float64, error) {
	if !validNumber(b) {
		return 0, errors.New("not a JSON number")
	}
	f, err := strconv.ParseFloat(string(b), bits)
	if err != nil {
		return 0, err
	}
	return f, nil
}

// validNumber checks the JSON number grammar.
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}

// skip consumes one JSON value of any kind and returns its bytes, checked for validity.
func (s *scanner) skip() (json.RawMessage, error) {
	s.ws()
	start := s.pos
	depth := 0
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case '"':
			if _, err := s.str(); err != nil {
				return nil, err
			}
			if depth == 0 {
				return s.checked(start)
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.checked(start) // the end of a scalar
			}
			depth--
			if depth == 0 {
				s.pos++
				return s.checked(start)
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.checked(start)
			}
		}
		s.pos++
	}
	if depth != 0 {
		return nil, s.errorf("unexpected end inside a value")
	}
	return s.checked(start)
}

func (s *scanner) checked(start int) (json.RawMessage, error) {
	raw := s.data[start:s.pos]
	if len(raw) == 0 || !json.Valid(raw) {
		return nil, s.errorf("invalid JSON value")
	}
	return raw, nil
}

// group reads a whole group object into g.
func (s *scanner) group(g *ScoredDataGroup) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	var ids, lps []*DistillRows
	var haveIDs, haveLps bool
	if s.peek() == '}' {
		s.pos++
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
		switch s.peek() {
		case ',':
			s.pos++
			continue
		case '}':
			s.pos++
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
	if s.null() {
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
	if s.null() {
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
	if s.null() {
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
	if s.null() {
		return nil, nil
	}
	out := [][]json.RawMessage{}
	err := s.list(func(int) error {
		seq := []json.RawMessage{}
		err := s.list(func(int) error {
			if s.peek() != '{' {
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
	if s.null() {
		return nil, nil
	}
	if s.peek() != '{' {
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
	if s.null() {
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
	if s.null() {
		return nil, nil
	}
	raw, err := s.skip()
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), raw...), nil
}

func (s *scanner) optInt() (*int, error) {
	if s.null() {
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
	if s.null() {
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
