package vllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// scanner walks a JSON document held in memory without building values, so that the
// large parts of a response (prompt_logprobs) go straight into flat arrays. Every
// method reports malformed input as an error; none panics on any input.
type scanner struct {
	data []byte
	pos  int
}

// maxDepth bounds nesting in skip, so hostile input cannot exhaust the stack.
const maxDepth = 512

var errUnexpectedEnd = errors.New("unexpected end of JSON input")

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

// ws skips whitespace.
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

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// consume skips c if it is the next non-space byte.
func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.pos++
		return true
	}
	return false
}

func (s *scanner) expect(c byte) error {
	if s.consume(c) {
		return nil
	}
	if s.pos >= len(s.data) {
		return errUnexpectedEnd
	}
	return s.errorf("want %q, found %q", c, s.data[s.pos])
}

// literal consumes the keyword lit (null, true, false).
func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
		s.pos += len(lit)
		return true
	}
	return false
}

// null consumes a null if it comes next.
func (s *scanner) null() bool { return s.peek() == 'n' && s.literal("null") }

// rawString consumes a string and returns its bytes between the quotes, and whether
// it contains escapes (then it must go through unquote).
func (s *scanner) rawString() (raw []byte, escaped bool, err error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if plainStringByte[c] {
			s.pos++
			continue
		}
		switch {
		case c == '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < 0x20:
			return nil, false, s.errorf("control character in string")
		default:
			s.pos++
		}
	}
	return nil, false, errUnexpectedEnd
}

// plainStringByte marks the bytes that need no attention inside a string.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str consumes a string and returns its value.
func (s *scanner) str() (string, error) {
	start := s.pos
	raw, esc, err := s.rawString()
	if err != nil {
		return "", err
	}
	if !esc {
		return string(raw), nil
	}
	var out string
	if err := json.Unmarshal(s.data[start:s.pos], &out); err != nil {
		return "", s.errorf("bad string: %v", err)
	}
	return out, nil
}

// knownKey consumes `"name":` when it comes next, exactly as written (the common case
// of the keys the decoder looks for); otherwise it consumes nothing.
func (s *scanner) knownKey(quotedColon string) bool {
	s.ws()
	if len(s.data)-s.pos >= len(quotedColon) && string(s.data[s.pos:s.pos+len(quotedColon)]) == quotedColon {
		s.pos += len(quotedColon)
		return true
	}
	return false
}

// key consumes an object key and its colon. The returned bytes alias the input when
// the key has no escapes.
func (s *scanner) key() ([]byte, error) {
	start := s.pos
	raw, esc, err := s.rawString()
	if err != nil {
		return nil, err
	}
	if esc {
		var out string
		if err := json.Unmarshal(s.data[start:s.pos], &out); err != nil {
			return nil, s.errorf("bad key: %v", err)
		}
		raw = []byte(out)
	}
	return raw, s.expect(':')
}

// number consumes a JSON number and returns its text, checked against the JSON grammar
// (strconv alone would accept "Inf", "0x1p3" and "1_0").
func (s *scanner) number() ([]byte, error) {
	s.ws()
	d, i := s.data, s.pos
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, s.errorf("want a number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, s.errorf("bad number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, s.errorf("bad number")
		}
	}
	s.pos = i
	return d[start:i], nil
}

// float32 consumes a number that must be finite as a float32.
func (s *scanner) float32() (float32, error) {
	num, err := s.number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(num), 32)
	if err != nil || math.IsInf(f, 0) {
		return 0, s.errorf("number %s is not a finite float32", num)
	}
	return float32(f), nil
}

// int32 consumes an integer that fits an int32.
func (s *scanner) int32() (int32, error) {
	num, err := s.number()
	if err != nil {
		return 0, err
	}
	return parseInt32(num)
}

// parseInt32 parses decimal digits with an optional minus sign, nothing else.
func parseInt32(b []byte) (int32, error) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 10 {
		return 0, fmt.Errorf("integer %q out of range", b)
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an integer", b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("integer %q out of range", b)
	}
	return int32(n), nil
}

// skip consumes any value and returns its raw bytes.
func (s *scanner) skip() ([]byte, error) {
	s.ws()
	start := s.pos
	if err := s.skipValue(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

func (s *scanner) skipValue(depth int) error {
	if depth > maxDepth {
		return s.errorf("nesting deeper than %d", maxDepth)
	}
	switch c := s.peek(); c {
	case 0:
		return errUnexpectedEnd
	case '"':
		_, _, err := s.rawString()
		return err
	case '{':
		s.pos++
		if s.consume('}') {
			return nil
		}
		for {
			if _, err := s.key(); err != nil {
				return err
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if s.consume(',') {
				continue
			}
			return s.expect('}')
		}
	case '[':
		s.pos++
		if s.consume(']') {
			return nil
		}
		for {
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if s.consume(',') {
				continue
			}
			return s.expect(']')
		}
	case 't':
		if s.literal("true") {
			return nil
		}
	case 'f':
		if s.literal("false") {
			return nil
		}
	case 'n':
		if s.literal("null") {
			return nil
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			_, err := s.number()
			return err
		}
	}
	return s.errorf("unexpected %q", s.data[s.pos])
}

// object calls member for each key of the object that comes next; member must consume
// the value. A null is accepted as an empty object when nullOK.
func (s *scanner) object(nullOK bool, member func(key []byte) error) error {
	if nullOK && s.null() {
		return nil
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.consume('}') {
		return nil
	}
	for {
		k, err := s.key()
		if err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		return s.expect('}')
	}
}

// array calls elem for each element of the array that comes next; elem must consume
// the element. A null is accepted as an empty array when nullOK.
func (s *scanner) array(nullOK bool, elem func(i int) error) error {
	if nullOK && s.null() {
		return nil
	}
	if err := s.expect('['); err != nil {
		return err
	}
	if s.consume(']') {
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		return s.expect(']')
	}
}

// end checks that nothing but whitespace follows.
func (s *scanner) end() error {
	if s.peek() != 0 || s.pos < len(s.data) {
		return s.errorf("data after the top-level value")
	}
	return nil
}

// unmarshalNext decodes the next value with encoding/json (for the small parts).
func (s *scanner) unmarshalNext(v any) error {
	raw, err := s.skip()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("JSON offset %d: %w", s.pos-len(raw), err)
	}
	return nil
}
