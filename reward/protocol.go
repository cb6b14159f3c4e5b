package reward

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// The relay reads each message of the two processes once, byte by byte as it arrives,
// checking its grammar on the way and keeping its bytes in chunks, the first of
// msgFirstChunk bytes, each next one twice the last up to msgChunk; it never decodes a
// value into Go values. A message costs its own size in memory (and
// a request or a reply that breaks the grammar is refused at the byte that breaks it),
// so a reply of many tiny values costs what a reply of one long string does.

// msgChunk is the largest chunk a message is kept in, and msgFirstChunk its first:
// most messages are a few dozen bytes, and a chunk of msgChunk for each of them made
// most of a verification's garbage.
const (
	msgChunk      = 64 << 10
	msgFirstChunk = 512
)

// errTooLong is the error of a message over MaxMessage bytes.
var errTooLong = fmt.Errorf("message longer than %d bytes (reward.MaxMessage)", MaxMessage)

// message is one message read from a process, or the error that ended its stream.
type message struct {
	// chunks hold the message, its newline included.
	chunks [][]byte
	// id is a reply's id.
	id int64
	// req is what the relay needs of a request.
	req request
	// hello reports the solution harness's first message.
	hello bool
	err   error
}

// request is what the relay needs of a message from the test process.
type request struct {
	op  string
	id  int64
	why string
	// size is the size of a request the test process could not send (op "over_limit").
	size int64
}

// forSolution reports whether the message is a request for the solution process
// (the others, "hello", "done", "bad_reply" and "over_limit", are for the relay).
func (r request) forSolution() bool {
	switch r.op {
	case "hello", "done", "bad_reply", "over_limit":
		return false
	}
	return true
}

// msgReader reads one message at a time from a process's stdout. Its methods keep
// the first error in err and return zero values after it, so that the grammar reads
// as a grammar; callers check err at the end.
type msgReader struct {
	br     *bufio.Reader
	n      int // bytes of the message so far
	chunks [][]byte
	err    error
}

func newMsgReader(r io.Reader) *msgReader {
	br, _ := readerPool.Get().(*bufio.Reader)
	if br == nil {
		return &msgReader{br: bufio.NewReaderSize(r, msgChunk)}
	}
	br.Reset(r)
	return &msgReader{br: br}
}

// readerPool keeps the buffered readers of finished relays (msgChunk bytes each).
var readerPool sync.Pool

// release gives the reader's buffer back for another relay; r must not be used
// after it.
func (r *msgReader) release() {
	r.br.Reset(nil)
	readerPool.Put(r.br)
	r.br = nil
}

// get reads the next byte of the message; 0 after an error (0 is never valid).
func (r *msgReader) get() byte {
	if r.err != nil {
		return 0
	}
	c, err := r.br.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) && r.n > 0 {
			err = io.ErrUnexpectedEOF // the stream ended inside a message
		}
		r.err = err
		return 0
	}
	r.n++
	if r.n > MaxMessage+1 {
		r.err = errTooLong
		return 0
	}
	last := len(r.chunks) - 1
	if last < 0 || len(r.chunks[last]) == cap(r.chunks[last]) {
		size := msgFirstChunk
		if last >= 0 {
			size = min(2*cap(r.chunks[last]), msgChunk)
		}
		r.chunks = append(r.chunks, make([]byte, 0, size))
		last++
	}
	r.chunks[last] = append(r.chunks[last], c)
	return c
}

// peek returns the next byte without reading it; 0 at an error or the end.
func (r *msgReader) peek() byte {
	if r.err != nil {
		return 0
	}
	b, err := r.br.Peek(1)
	if err != nil {
		return 0
	}
	return b[0]
}

// fail records a grammar error (the first error wins).
func (r *msgReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// ws skips JSON white space other than the newline that ends a message.
func (r *msgReader) ws() byte {
	for {
		switch c := r.peek(); c {
		case ' ', '\t', '\r':
			r.get()
		default:
			return c
		}
	}
}

// expect reads c, after white space.
func (r *msgReader) expect(c byte) {
	if got := r.ws(); got != c {
		if r.err == nil {
			r.get() // an I/O error, if that is why
		}
		r.fail("want %q at byte %d, got %q", c, r.n, got)
		return
	}
	r.get()
}

// more reads what follows an element of a list: true after ',', false after ']'.
func (r *msgReader) more(end byte) bool {
	switch c := r.ws(); c {
	case ',':
		r.get()
		return true
	case end:
		r.get()
		return false
	default:
		r.get()
		r.fail("want ',' or %q at byte %d", end, r.n)
		return false
	}
}

// begin reads the '[' of a list and reports whether it has elements.
func (r *msgReader) begin() bool {
	r.expect('[')
	if r.ws() == ']' {
		r.get()
		return false
	}
	return r.err == nil
}

// members reads what follows the '{' of an object and reports whether it has
// members; an empty object's '}' is read.
func (r *msgReader) members() bool {
	if r.ws() == '}' {
		r.get()
		return false
	}
	return r.err == nil
}

// end reads the newline that ends a message, after white space, and returns the
// message.
func (r *msgReader) end() message {
	if c := r.ws(); c != '\n' {
		r.get()
		r.fail("text after the JSON object at byte %d", r.n)
	}
	r.get()
	m := message{chunks: r.chunks, err: r.err}
	if m.err != nil {
		m.chunks = nil
	}
	return m
}

// start begins a message.
func (r *msgReader) start() {
	r.n, r.chunks = 0, nil
}

// str reads a JSON string of ASCII characters (as both harnesses write them), calling
// each (when not nil) for every byte between its quotes, as written (escapes
// included), until each returns false, which fails the message; it reports whether
// the string had escapes.
func (r *msgReader) str(each func(c byte) bool) (escaped bool) {
	r.expect('"')
	emit := func(c byte) {
		if each != nil && r.err == nil && !each(c) {
			each = nil
			r.fail("a bad string at byte %d", r.n)
		}
	}
	for r.err == nil {
		c := r.get()
		switch {
		case c == '"':
			return escaped
		case c == '\\':
			escaped = true
			emit(c)
			switch e := r.get(); e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				emit(e)
			case 'u':
				emit(e)
				for range 4 {
					h := r.get()
					if !isHex(h) {
						r.fail("a bad \\u escape at byte %d", r.n)
					}
					emit(h)
				}
			default:
				r.fail("a bad escape at byte %d", r.n)
			}
		case c < 0x20 || c >= 0x80:
			r.fail("byte %#x in a string at byte %d", c, r.n)
		default:
			emit(c)
		}
	}
	return escaped
}

// word reads a string of at most max bytes without escapes.
func (r *msgReader) word(max int) string {
	var b []byte
	if r.str(func(c byte) bool { b = append(b, c); return len(b) <= max }) {
		r.fail("an escape in a name at byte %d", r.n)
	}
	return string(b)
}

// identifier reads a name as Python's would be: ASCII, at most 100 bytes.
func (r *msgReader) identifier() string {
	s := r.word(100)
	if r.err == nil && !isIdentifier(s) {
		r.fail("%q is not a name", s)
	}
	return s
}

// integer reads a JSON integer that fits an int64.
func (r *msgReader) integer() int64 {
	var b [24]byte
	n := 0
	c := r.ws()
	if c == '-' {
		b[n] = r.get()
		n++
		c = r.peek()
	}
	for isDigit(c) && n < len(b) {
		b[n] = r.get()
		n++
		c = r.peek()
	}
	i, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil || (n > 1 && b[0] == '0') || (n > 2 && b[0] == '-' && b[1] == '0') || c == '.' || c == 'e' || c == 'E' {
		r.get()
		r.fail("not an integer at byte %d", r.n)
		return 0
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
func isLowerHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f'
}

func isIdentifier(s string) bool {
	if s == "" || len(s) > 100 || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}
