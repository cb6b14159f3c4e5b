package jsonscan

import "io"

// StreamWindow is the size a streaming [Scanner] starts its window at.
const StreamWindow = 64 << 10

// NewStream returns a Scanner that reads its document from r as it goes, through a
// window that holds the token being read (a whole value for [Scanner.Skip]), not the
// document: Data is that window and Pos an offset in it, and a [*SyntaxError] still
// gives its offset from the start of the document. The window starts at size bytes
// (StreamWindow when size ≤ 0) and grows only for a value that does not fit.
//
// The byte slices a streaming Scanner returns stay valid until its next call, which
// may reuse the window. A failed read of r ends the document: the call that needed
// the bytes reports [ErrUnexpectedEnd] or a syntax error, and [Scanner.ReadErr] gives
// the read's own error.
func NewStream(r io.Reader, size int) *Scanner {
	if size <= 0 {
		size = StreamWindow
	}
	return &Scanner{Data: make([]byte, 0, size), r: r}
}

// ReadErr returns the error that ended reading the stream early, other than io.EOF,
// or nil (and always nil for a Scanner over a document in memory).
func (s *Scanner) ReadErr() error { return s.readErr }

// Offset returns the offset of the next byte to read from the start of the document
// (Pos, for a Scanner over a document in memory).
func (s *Scanner) Offset() int { return s.base + s.Pos }

// more reads more of the stream into the window, keeping Data[keep:] (keep ≤ Pos) and
// anything from a Skip or a Key under way. It reports false at the end of the stream,
// and for a Scanner over a document in memory. Dropped bytes shift every offset into
// Data: dropped says by how much, for the offsets a caller holds (Pos and the pin
// move by themselves), and may be above 0 even when ok is false.
func (s *Scanner) more(keep int) (dropped int, ok bool) {
	if s.r == nil || s.eof {
		return 0, false
	}
	if s.pinned {
		keep = min(keep, s.pin)
	}
	if len(s.Data) == cap(s.Data) {
		kept := len(s.Data) - keep
		buf := s.Data[:0]
		if kept > cap(s.Data)/2 {
			// The value being read fills most of the window: a new one, twice as large,
			// so that the bytes returned so far stay as they are.
			buf = make([]byte, 0, 2*cap(s.Data))
		}
		s.Data = append(buf, s.Data[keep:]...) // copy handles the overlap of a slide
		dropped = keep
		s.base += keep
		s.Pos -= keep
		s.pin -= keep
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

// endErr is the error for a document that ends where a value must go on: the read's
// error when reading failed, else ErrUnexpectedEnd.
func (s *Scanner) endErr() error {
	if s.readErr != nil {
		return s.readErr
	}
	return ErrUnexpectedEnd
}
