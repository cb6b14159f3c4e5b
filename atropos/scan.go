package atropos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// This file adapts the shared JSON scanner to groups: errors that match ErrSyntax and
// name the key being read, integers that may be written as integral floats, numbers
// read whole so that errors quote them and NaN and Infinity are told apart, and skipped
// values checked to be valid JSON. decode.go maps a group's keys onto it.

// maxSkipDepth is the nesting skip allows: encoding/json's own limit, which Valid
// applies to what is skipped.
const maxSkipDepth = 10000

// scanner is the shared scanner with the group decoder's error model.
type scanner struct {
	jsonscan.Scanner
	path string // current top-level key, for errors
}

func newScanner(data []byte) scanner {
	return scanner{Scanner: jsonscan.Scanner{Data: data, MaxDepth: maxSkipDepth}}
}

func (s *scanner) errorf(format string, args ...any) error {
	return s.errorAt(s.Pos, fmt.Sprintf(format, args...))
}

func (s *scanner) errorAt(offset int, msg string) error {
	return fmt.Errorf("%w: offset %d%s: %s", ErrSyntax, offset, s.where(), msg)
}

// syntax turns an error of the shared scanner into one that matches ErrSyntax; end is
// the message for input that ends too soon.
func (s *scanner) syntax(err error, end string) error {
	var se *jsonscan.SyntaxError
	switch {
	case errors.Is(err, jsonscan.ErrUnexpectedEnd):
		return s.errorf("%s", end)
	case errors.As(err, &se):
		return s.errorAt(se.Offset, se.Msg)
	}
	return s.errorf("%v", err)
}

// nonFinite reports NaN or Infinity in the input; the error matches both ErrSyntax and
// ErrNonFinite.
func (s *scanner) nonFinite() error {
	return fmt.Errorf("%w: offset %d%s: %w", ErrSyntax, s.Pos, s.where(), ErrNonFinite)
}

func (s *scanner) where() string {
	if s.path == "" {
		return ""
	}
	return " in " + strconv.Quote(s.path)
}

func (s *scanner) expect(c byte) error {
	if got := s.Peek(); got != c {
		if got == 0 {
			return s.errorf("unexpected end, want %q", c)
		}
		return s.errorf("found %q, want %q", got, c)
	}
	s.Pos++
	return nil
}

// list iterates over the elements of a JSON array, calling elem for each.
func (s *scanner) list(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.Consume(']') {
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.Pos++
		case ']':
			s.Pos++
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
	if s.Peek() != '"' {
		return "", s.errorf("want a string")
	}
	v, err := s.String()
	if err != nil {
		return "", s.syntax(err, "unterminated string")
	}
	return v, nil
}

// number returns the bytes of the next JSON number. It takes every byte a number may
// hold and leaves the grammar to int and float, so that their errors quote the whole.
func (s *scanner) number() ([]byte, error) {
	s.WS()
	start := s.Pos
	for s.Pos < len(s.Data) {
		c := s.Data[s.Pos]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.Pos++
			continue
		}
		break
	}
	if start == s.Pos || (s.Pos-start == 1 && s.Data[start] == '-') {
		if s.Pos < len(s.Data) && (s.Data[s.Pos] == 'N' || s.Data[s.Pos] == 'I') {
			return nil, s.nonFinite()
		}
		return nil, s.errorf("want a number")
	}
	return s.Data[start:s.Pos], nil
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
	if !jsonscan.ValidNumber(b) {
		return 0, errors.New("not a JSON number")
	}
	return strconv.ParseFloat(string(b), bits)
}

// skip consumes one JSON value of any kind and returns its bytes, checked for validity.
func (s *scanner) skip() (json.RawMessage, error) {
	raw, err := s.Skip()
	if err != nil {
		return nil, s.syntax(err, "unexpected end inside a value")
	}
	if !json.Valid(raw) {
		return nil, s.errorf("invalid JSON value")
	}
	return raw, nil
}
