package atropos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// This file holds the JSON scanner the group decoder is built on: tokens, strings,
// numbers (with JSON's grammar, not strconv's), arrays, and skipping unknown values.
// decode.go maps a group's keys onto it.

// scanner is a small JSON reader specialised for groups.
type scanner struct {
	data []byte
	pos  int
	path string // current top-level key, for errors
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d%s: %s", ErrSyntax, s.pos, s.where(), fmt.Sprintf(format, args...))
}

// nonFinite reports NaN or Infinity in the input; the error matches both ErrSyntax and
// ErrNonFinite.
func (s *scanner) nonFinite() error {
	return fmt.Errorf("%w: offset %d%s: %w", ErrSyntax, s.pos, s.where(), ErrNonFinite)
}

func (s *scanner) where() string {
	if s.path == "" {
		return ""
	}
	return " in " + strconv.Quote(s.path)
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
			return nil, s.nonFinite()
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
