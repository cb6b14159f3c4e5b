package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
)

// DefaultMaxDepth is the nesting [Scanner.Skip] allows when [Scanner.MaxDepth] is 0.
const DefaultMaxDepth = 512

// ErrUnexpectedEnd reports a document that ends inside a token or value.
var ErrUnexpectedEnd = errors.New("unexpected end of JSON input")

// SyntaxError reports malformed JSON at a byte offset.
type SyntaxError struct {
	// Offset is where reading stopped, in bytes from the start of the document.
	Offset int
	// Msg says what was wrong.
	Msg string
}

// Error returns "JSON offset N: Msg".
func (e *SyntaxError) Error() string {
	return "JSON offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Scanner reads the JSON document Data from offset Pos. The zero value with Data set
// reads Data from its start; [NewStream] makes one that reads a stream. Each method
// consumes what it reads and advances Pos; after an error, Pos is where reading
// stopped. A Scanner is not safe for concurrent use.
type Scanner struct {
	// Data is the document, or a streaming Scanner's window on it; the scanner never
	// modifies a document given to it, and the byte slices it returns alias Data.
	Data []byte
	// Pos is the offset of the next byte to read in Data.
	Pos int
	// MaxDepth bounds the nesting of values Skip consumes, so that hostile input cannot
	// exhaust the stack; 0 means DefaultMaxDepth.
	MaxDepth int

	// A streaming Scanner's state (stream.go).
	r       io.Reader
	eof     bool  // r has no more bytes to give
	readErr error // why reading r stopped early
	base    int   // bytes of the document before Data[0]
	whole   int   // a value that starts before whole is in Data whole (see needValue)
	bigAt   int   // where the last object or array too long to take whole starts, plus 1
}

// Errorf returns a [*SyntaxError] at the current offset.
func (s *Scanner) Errorf(format string, args ...any) error {
	return &SyntaxError{Offset: s.base + s.Pos, Msg: fmt.Sprintf(format, args...)}
}

// WS skips white space.
func (s *Scanner) WS() {
	for s.Pos < len(s.Data) {
		switch s.Data[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	s.WS()
	if s.Pos >= len(s.Data) {
		return 0
	}
	return s.Data[s.Pos]
}

// Consume skips white space and then c if c comes next, and reports whether it did.
func (s *Scanner) Consume(c byte) bool {
	if s.Peek() == c {
		s.Pos++
		return true
	}
	return false
}

// Expect consumes c, which must come next after white space.
func (s *Scanner) Expect(c byte) error {
	if s.Consume(c) {
		return nil
	}
	if s.Pos >= len(s.Data) {
		return s.endErr()
	}
	return s.Errorf("want %q, found %q", c, s.Data[s.Pos])
}

// Literal consumes the keyword lit (null, true, false) if it comes next after white
// space, and reports whether it did.
func (s *Scanner) Literal(lit string) bool {
	s.WS()
	if len(s.Data)-s.Pos >= len(lit) && string(s.Data[s.Pos:s.Pos+len(lit)]) == lit {
		s.Pos += len(lit)
		return true
	}
	return false
}

// Null consumes a null if one comes next, and reports whether it did.
func (s *Scanner) Null() bool {
	if s.r != nil {
		s.WS()
		s.fill(len("null"))
	}
	return s.Peek() == 'n' && s.Literal("null")
}

// RawString consumes a string and returns its bytes between the quotes, and whether it
// contains escapes (then only [Unquote] gives its value). Escapes are not checked.
func (s *Scanner) RawString() (raw []byte, escaped bool, err error) {
	if s.r != nil {
		s.Buffer()
	}
	if err := s.Expect('"'); err != nil {
		return nil, false, err
	}
	start := s.Pos
	for s.Pos < len(s.Data) {
		c := s.Data[s.Pos]
		if plainStringByte[c] {
			s.Pos++
			continue
		}
		switch {
		case c == '"':
			raw = s.Data[start:s.Pos]
			s.Pos++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.Pos += 2
		case c < 0x20:
			return nil, false, s.Errorf("control character in string")
		default:
			s.Pos++
		}
	}
	return nil, false, s.endErr()
}

// plainStringByte marks the bytes that need no attention inside a string.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Unquote returns the value of quoted, a JSON string with its quotes.
func Unquote(quoted []byte) (string, error) {
	var out string
	err := json.Unmarshal(quoted, &out)
	return out, err
}

// String consumes a string and returns its value.
func (s *Scanner) String() (string, error) {
	raw, esc, err := s.RawString()
	if err != nil {
		return "", err
	}
	if !esc {
		return string(raw), nil
	}
	out, err := Unquote(s.Data[s.Pos-len(raw)-2 : s.Pos]) // raw and its quotes
	if err != nil {
		return "", s.Errorf("bad string: %v", err)
	}
	return out, nil
}

// KnownKey consumes `"name":` when it comes next after white space exactly as written
// (pass the quoted key and the colon, as in `"rank":`), and reports whether it did;
// otherwise it consumes nothing but white space. It is the fast path for the keys a
// decoder expects; [Scanner.Key] reads any key.
func (s *Scanner) KnownKey(quotedColon string) bool { return s.Literal(quotedColon) }

// Key consumes an object key and its colon. The returned bytes alias Data when the key
// has no escapes.
func (s *Scanner) Key() ([]byte, error) {
	raw, esc, err := s.RawString()
	if err != nil {
		return nil, err
	}
	if esc {
		out, err := Unquote(s.Data[s.Pos-len(raw)-2 : s.Pos])
		if err != nil {
			return nil, s.Errorf("bad key: %v", err)
		}
		raw = []byte(out)
	}
	return raw, s.Expect(':')
}

// Number consumes a number and returns its text, checked against the JSON grammar
// (strconv alone would accept "Inf", "0x1p3" and "1_0"). On error nothing but white
// space is consumed.
func (s *Scanner) Number() ([]byte, error) {
	if s.r != nil {
		s.Buffer()
	}
	s.WS()
	end, bad := numberEnd(s.Data, s.Pos)
	if bad != "" {
		return nil, s.Errorf("%s", bad)
	}
	start := s.Pos
	s.Pos = end
	return s.Data[start:end], nil
}

// ValidNumber reports whether b is exactly one number under the JSON grammar.
func ValidNumber(b []byte) bool {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return false // and Number must not skip leading white space
	}
	s := Scanner{Data: b}
	_, err := s.Number()
	return err == nil && s.Pos == len(b)
}

// Float32 consumes a number that must be finite as a float32.
func (s *Scanner) Float32() (float32, error) {
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(num), 32)
	if err != nil || math.IsInf(f, 0) {
		return 0, s.Errorf("number %s is not a finite float32", num)
	}
	return float32(f), nil
}

// Int32 consumes an integer that fits an int32, written without fraction or exponent.
func (s *Scanner) Int32() (int32, error) {
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	return ParseInt32(num)
}

var comma = []byte{','}

// Int32s consumes an array of integers that fit an int32 (as [Scanner.Int32] reads
// each), or a null, which gives nil. It reads what json.Unmarshal into a []int32 reads
// (a null element is 0), without its reflection and its validating pre-pass; ids
// written the way servers write them (digits followed by ',' or ']') take a shorter
// path.
func (s *Scanner) Int32s() ([]int32, error) {
	if s.r != nil {
		s.Buffer()
	}
	if s.Null() {
		return nil, nil
	}
	if err := s.Expect('['); err != nil {
		return nil, err
	}
	if s.Consume(']') {
		return []int32{}, nil
	}
	// A list of numbers holds no ']' before its own: the commas up to the first one
	// size the result once (a guess only: the loop below still reads every element).
	// Each element takes two bytes at least, which bounds the guess on garbage.
	n := 1
	if end := bytes.IndexByte(s.Data[s.Pos:], ']'); end >= 0 {
		n += min(bytes.Count(s.Data[s.Pos:s.Pos+end], comma), end/2)
	}
	out := make([]int32, 0, n)
	for {
		s.WS()
		n, ok := s.plainInt32()
		if ok { // then a ',' or a ']' follows at once
			out = append(out, n)
			s.Pos++
			if s.Data[s.Pos-1] == ',' {
				continue
			}
			return out, nil
		}
		if !s.Null() {
			var err error
			if n, err = s.Int32(); err != nil {
				return nil, err
			}
		}
		out = append(out, n)
		if s.Consume(',') {
			continue
		}
		if err := s.Expect(']'); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// plainInt32 consumes a non-negative integer of at most nine digits, without a
// leading zero, that is followed at once by ',' or ']'; ok is false, and nothing is
// consumed, for anything else.
func (s *Scanner) plainInt32() (n int32, ok bool) {
	d, i := s.Data, s.Pos
	if i+8 <= len(d) {
		// Eight bytes at once: token ids have one to six digits, and a byte loop
		// mispredicts the end of almost every one.
		v := binary.LittleEndian.Uint64(d[i:])
		u := v - 0x3030303030303030 // each digit's value; a byte below '0' borrows
		// A byte's top bit ends up set when it is below '0' (u), above '9' (the
		// addition) or at least 0x80 (v). Borrows and carries run towards later
		// bytes only, so the bytes before the first non-digit are exact.
		k := bits.TrailingZeros64((u|(v+0x4646464646464646)|v)&0x8080808080808080) / 8
		if k == 0 || k == 8 || k > 1 && d[i] == '0' || d[i+k] != ',' && d[i+k] != ']' {
			return 0, false // what the byte loop below would refuse too, or eight digits and more
		}
		x := (u << (64 - 8*k)) & 0x0F0F0F0F0F0F0F0F // digits at the top, zeros before them
		x = (x * (1 + 10<<8)) >> 8 & 0x00FF00FF00FF00FF
		x = (x * (1 + 100<<16)) >> 16 & 0x0000FFFF0000FFFF
		x = (x * (1 + 10000<<32)) >> 32
		s.Pos = i + k
		return int32(x), true
	}
	j := i
	for j < len(d) && j-i < 10 && d[j] >= '0' && d[j] <= '9' {
		n = n*10 + int32(d[j]-'0')
		j++
	}
	switch {
	case j == i, j-i == 10, j-i > 1 && d[i] == '0':
		return 0, false
	case j < len(d) && (d[j] == ',' || d[j] == ']'):
		s.Pos = j
		return n, true
	}
	return 0, false
}

// ParseInt32 parses decimal digits with an optional minus sign, nothing else, into an
// int32. Its errors carry no offset.
func ParseInt32(b []byte) (int32, error) {
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

// Skip consumes one value of any kind and returns its bytes. It checks the structure
// but not the escapes of strings inside the value (see the package doc), and refuses
// nesting deeper than MaxDepth.
func (s *Scanner) Skip() ([]byte, error) {
	if s.r != nil {
		s.Buffer()
	}
	s.WS()
	start := s.Pos
	maxDepth := s.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if err := s.skipValue(0, maxDepth); err != nil {
		return nil, err
	}
	return s.Data[start:s.Pos], nil
}

func (s *Scanner) skipValue(depth, maxDepth int) error {
	if depth > maxDepth {
		return s.Errorf("nesting deeper than %d", maxDepth)
	}
	switch c := s.Peek(); c {
	case 0:
		return s.endErr()
	case '"':
		_, _, err := s.RawString()
		return err
	case '{':
		s.Pos++
		if s.Consume('}') {
			return nil
		}
		for {
			if _, err := s.Key(); err != nil {
				return err
			}
			if err := s.skipValue(depth+1, maxDepth); err != nil {
				return err
			}
			if s.Consume(',') {
				continue
			}
			return s.Expect('}')
		}
	case '[':
		s.Pos++
		return s.elements(func(int) error { return s.skipValue(depth+1, maxDepth) })
	case 't':
		if s.Literal("true") {
			return nil
		}
	case 'f':
		if s.Literal("false") {
			return nil
		}
	case 'n':
		if s.Literal("null") {
			return nil
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			_, err := s.Number()
			return err
		}
	}
	return s.Errorf("unexpected %q", s.Data[s.Pos])
}

// Object calls member for each key of the object that comes next; member must consume
// the value. A null is accepted as an empty object when nullOK. In a streaming
// Scanner, key is valid until member's first call on the Scanner.
func (s *Scanner) Object(nullOK bool, member func(key []byte) error) error {
	if s.r != nil {
		s.needValue(smallValue)
	}
	if nullOK && s.Null() {
		return nil
	}
	if err := s.Expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		if s.r != nil {
			s.needMember()
		}
		if first && s.Consume('}') {
			return nil
		}
		k, err := s.Key()
		if err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
		if s.r != nil {
			s.Fill()
		}
		if s.Consume(',') {
			continue
		}
		return s.Expect('}')
	}
}

// Array calls elem for each element of the array that comes next, with its index;
// elem must consume the element. A null is accepted as an empty array when nullOK.
func (s *Scanner) Array(nullOK bool, elem func(i int) error) error {
	if s.r != nil {
		s.needValue(smallValue)
	}
	if nullOK && s.Null() {
		return nil
	}
	if err := s.Expect('['); err != nil {
		return err
	}
	return s.elements(elem)
}

// elements reads the rest of an array whose '[' is consumed.
func (s *Scanner) elements(elem func(i int) error) error {
	for i := 0; ; i++ {
		if s.r != nil {
			s.needValue(smallValue)
		}
		if i == 0 && s.Consume(']') {
			return nil
		}
		if err := elem(i); err != nil {
			return err
		}
		if s.r != nil {
			s.Fill()
		}
		if s.Consume(',') {
			continue
		}
		return s.Expect(']')
	}
}

// End checks that nothing but white space follows.
func (s *Scanner) End() error {
	if s.r != nil {
		s.Fill()
	}
	if s.Peek() != 0 || s.Pos < len(s.Data) {
		return s.Errorf("data after the top-level value")
	}
	return nil
}

// UnmarshalNext decodes the next value into v with encoding/json (for the small parts
// of a document). Its errors wrap encoding/json's.
func (s *Scanner) UnmarshalNext(v any) error {
	raw, err := s.Skip()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("JSON offset %d: %w", s.Offset()-len(raw), err)
	}
	return nil
}
