package jsonscan

import "io"

// StreamWindow is the size a streaming [Scanner] starts its window at.
const StreamWindow = 64 << 10

// smallValue is how long a value may be for a streaming Scanner to take it into its
// window whole when an object or array reaches it; a longer object or array is read
// member by member (strings and numbers are always taken whole).
const smallValue = 16 << 10

// NewStream returns a Scanner that reads its document from r as it goes, through a
// window that holds the values being read rather than the document: Data is that
// window and Pos an offset in it, and a [*SyntaxError] still gives its offset from
// the start of the document. The window starts at size bytes (StreamWindow when
// size ≤ 0) and grows for a value that must be held whole and does not fit: a
// string, a number, a value that [Scanner.Skip], [Scanner.Int32s] or
// [Scanner.Buffer] reads, or an object or array of at most 16 KiB that
// [Scanner.Object] or [Scanner.Array] meets. A longer object or array is read member
// by member; finding out that it is longer reads 16 KiB of it.
//
// Its methods give what they give over the same bytes in memory. The window is
// filled at the start of a value and of each member or element of an object or an
// array; the methods that read within a value (WS, Peek, Consume, Expect, Literal,
// KnownKey) do not read on, so that they cost what they cost over a document in
// memory. A decoder that walks a value with them rather than with Object and Array
// calls [Scanner.Buffer] first, and one that looks at the document's first value
// with Peek calls [Scanner.Fill]. The byte slices a streaming Scanner returns stay
// valid until its next call, which may reuse the window.
//
// A failed read of r ends the document: the call that needed the bytes reports
// [ErrUnexpectedEnd] or a syntax error, and [Scanner.ReadErr] gives the read's own
// error.
func NewStream(r io.Reader, size int) *Scanner {
	if size <= 0 {
		size = StreamWindow
	}
	return &Scanner{Data: make([]byte, 0, size), r: r}
}

// Streaming reports whether s reads a stream (NewStream) rather than a document
// held whole in Data; only then may Data drop bytes already read.
func (s *Scanner) Streaming() bool { return s.r != nil }

// ReadErr returns the error that ended reading the stream early, other than io.EOF,
// or nil (and always nil for a Scanner over a document in memory).
func (s *Scanner) ReadErr() error { return s.readErr }

// Offset returns the offset of the next byte to read from the start of the document
// (Pos, for a Scanner over a document in memory).
func (s *Scanner) Offset() int { return s.base + s.Pos }

// Buffer makes the next value readable whole in a streaming Scanner's window,
// whatever its length, with the first byte after it that is not white space; it does
// nothing for a Scanner over a document in memory.
func (s *Scanner) Buffer() {
	if s.r != nil {
		s.needValue(0)
	}
}

// Fill reads on, in a streaming Scanner, until the next byte that is not white space
// is in the window or the stream ends; it does nothing for a Scanner over a document
// in memory. Peek needs it at the start of a document, before any method that reads
// on.
func (s *Scanner) Fill() {
	if s.r != nil {
		s.WS()
		if s.Pos == len(s.Data) {
			s.Pos, _ = s.skipWS(s.Pos)
		}
	}
}

// fill reads on until n bytes follow Pos in the window, or the stream ends.
func (s *Scanner) fill(n int) {
	for len(s.Data)-s.Pos < n {
		if _, ok := s.more(s.Pos); !ok {
			return
		}
	}
}

// endErr is the error for a document that ends where a value must go on: the read's
// error when reading failed, else ErrUnexpectedEnd.
func (s *Scanner) endErr() error {
	if s.readErr != nil {
		return s.readErr
	}
	return ErrUnexpectedEnd
}

// more reads more of the stream into the window, keeping Data[keep:] (keep ≤ Pos).
// It reports false at the end of the stream. Dropped bytes shift every offset into
// Data: dropped says by how much, for the offsets the caller holds (Pos and whole
// move by themselves); it may be above 0 even when ok is false.
func (s *Scanner) more(keep int) (dropped int, ok bool) {
	if s.r == nil || s.eof {
		return 0, false
	}
	if len(s.Data) == cap(s.Data) {
		kept := len(s.Data) - keep
		buf := s.Data[:0]
		if kept > cap(s.Data)/2 {
			// What must stay fills most of the window: a new one, twice as large.
			buf = make([]byte, 0, 2*cap(s.Data))
		}
		s.Data = append(buf, s.Data[keep:]...) // copy handles the overlap of a slide
		dropped = keep
		s.base += keep
		s.Pos -= keep
		s.whole = max(s.whole-keep, 0)
	}
	for range 100 {
		n, err := s.r.Read(s.Data[len(s.Data):cap(s.Data)])
		s.Data = s.Data[:len(s.Data)+n]
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.readErr = err
			}
			return dropped, n > 0
		}
		if n > 0 {
			return dropped, true
		}
	}
	s.eof, s.readErr = true, io.ErrNoProgress
	return dropped, false
}

// needValue skips white space and makes the value that comes next readable in the
// window, unless one that starts there is already (it starts before whole): whole,
// with the first byte after it that is not white space (which moves whole to that
// byte), when it is a string, a number, a literal, or an object or array of at most
// limit bytes (limit 0: of any length); only its first byte otherwise. On malformed
// input it stops where the value's shape breaks, and the method that reads the value
// reports the error, as over the same bytes in memory.
func (s *Scanner) needValue(limit int) {
	if s.r == nil {
		return
	}
	s.WS()
	if s.Pos < s.whole && s.Pos < len(s.Data) {
		return
	}
	i, ok := s.skipWS(s.Pos)
	s.Pos = i
	if !ok {
		return
	}
	if end, whole := s.scanValue(i, limit); whole {
		s.whole, _ = s.skipWS(end)
	}
}

// needMember is needValue for an object's next member: its key, colon and value,
// taken together (a value of at most smallValue bytes whole).
func (s *Scanner) needMember() {
	s.WS()
	if s.Pos < s.whole && s.Pos < len(s.Data) {
		return
	}
	i, ok := s.skipWS(s.Pos)
	s.Pos = i
	if !ok || s.Data[i] != '"' {
		return
	}
	end, _ := s.scanValue(i, 0)
	end, ok = s.skipWS(end)
	if ok && s.Data[end] == ':' {
		if end, ok = s.skipWS(end + 1); ok {
			var whole bool
			if end, whole = s.scanValue(end, smallValue); !whole {
				return
			}
		}
	}
	s.whole, _ = s.skipWS(end)
}

// skipWS returns the index of the first byte at or after i that is not white space,
// reading on as needed and keeping everything from Pos; ok is false at the end of
// the stream, and i is then len(Data).
func (s *Scanner) skipWS(i int) (int, bool) {
	for {
		for i < len(s.Data) {
			switch s.Data[i] {
			case ' ', '\t', '\n', '\r':
				i++
			default:
				return i, true
			}
		}
		dropped, ok := s.more(s.Pos)
		i -= dropped
		if !ok {
			return len(s.Data), false
		}
	}
}

// scanValue finds the end of the value at Data[i], reading on as needed and keeping
// everything from Pos. whole is false for an object or array longer than limit
// (limit 0: no limit), and end is then i+1; at the end of the stream, or where the
// value's shape breaks, end is where scanning stopped and whole is true.
func (s *Scanner) scanValue(i, limit int) (end int, whole bool) {
	start := i
	depth := 0
	inString := false
	for {
		if i >= len(s.Data) { // i may be one past it, after a backslash at its end
			if limit > 0 && depth > 0 && i-start > limit {
				s.bigAt = s.base + start + 1
				return start + 1, false
			}
			dropped, ok := s.more(s.Pos)
			i -= dropped
			start -= dropped
			if !ok {
				return min(i, len(s.Data)), true
			}
			continue
		}
		if inString {
			// A run of plain bytes at a time: the bulk of a document.
			for i < len(s.Data) && !quoteOrBackslash[s.Data[i]] {
				i++
			}
			switch {
			case i >= len(s.Data):
			case s.Data[i] == '\\':
				i += 2 // and the escaped byte, whatever it is
			default: // the closing quote
				inString = false
				i++
				if depth == 0 {
					return i, true
				}
			}
			continue
		}
		switch scanClass[s.Data[i]] {
		case classQuote:
			inString = true
		case classOpen:
			if depth == 0 && limit > 0 && s.bigAt == s.base+i+1 {
				return i + 1, false // found too long before
			}
			depth++
		case classClose:
			if depth == 0 {
				return i, true // the end of a number or a literal
			}
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case classEnd:
			if depth == 0 {
				return i, true // the end of a number or a literal
			}
		}
		i++
	}
}

// The bytes scanValue tells apart.
const (
	classPlain = iota
	classQuote
	classOpen
	classClose
	classEnd // ends a number or a literal: ',', ':' and white space
)

// quoteOrBackslash marks the bytes that end a run inside a string for scanValue (a
// control character does not: the method reading the string reports it).
var quoteOrBackslash = [256]bool{'"': true, '\\': true}

var scanClass = func() (t [256]uint8) {
	t['"'] = classQuote
	t['{'], t['['] = classOpen, classOpen
	t['}'], t[']'] = classClose, classClose
	for _, c := range []byte{',', ':', ' ', '\t', '\n', '\r'} {
		t[c] = classEnd
	}
	return t
}()
