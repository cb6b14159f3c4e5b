package atropos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Encoder writes groups as JSON Lines, one group per line, the format BaseEnv's process
// mode writes. Each group is streamed to the writer in chunks, so the encoder never
// holds a whole encoded group. An Encoder is not safe for concurrent use.
type Encoder struct {
	jw   jsonWriter
	opts EncodeOptions
}

// NewEncoder returns an encoder writing to w. Each [Encoder.Encode] call ends with a
// write to w; w is not closed.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{jw: jsonWriter{w: w, buf: make([]byte, 0, flushSize+4096)}}
}

// SetOptions sets the encoding options for later groups.
func (e *Encoder) SetOptions(opts EncodeOptions) { e.opts = opts }

// Encode writes g as one line. A group that cannot be encoded ([ErrNonFinite], invalid
// raw JSON, an unencodable free-form value) is refused before anything is written, so the
// encoder stays usable and the output holds whole lines only. After a write error part of
// the line may have been written; the error sticks and later calls return it.
func (e *Encoder) Encode(g *ScoredDataGroup) error {
	if e.jw.err != nil {
		return e.jw.err
	}
	// The line is streamed in chunks: check first what could fail halfway.
	if err := g.checkEncodable(e.opts.DenseZeroPad); err != nil {
		return err
	}
	e.jw.buf = e.jw.buf[:0]
	if err := g.encode(&e.jw, &e.opts); err != nil {
		e.jw.buf = e.jw.buf[:0]
		return err
	}
	e.jw.buf = append(e.jw.buf, '\n')
	e.jw.flush()
	return e.jw.err
}

// WriteJSONL writes groups to w, one per line.
func WriteJSONL(w io.Writer, groups ...*ScoredDataGroup) error {
	enc := NewEncoder(w)
	for i, g := range groups {
		if err := enc.Encode(g); err != nil {
			return fmt.Errorf("atropos: group %d: %w", i, err)
		}
	}
	return nil
}

// Decoder reads groups from JSON Lines, one group per line; blank lines are skipped.
// Only one line is held in memory at a time. A Decoder is not safe for concurrent use.
type Decoder struct {
	r    *bufio.Reader
	line int
	buf  []byte
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 1<<20)}
}

// Decode reads the next group. It returns io.EOF when the input is done, and an error
// naming the line for a malformed group (matching [ErrSyntax]) or a read error.
func (d *Decoder) Decode() (*ScoredDataGroup, error) {
	for {
		line, err := d.readLine()
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, err
		}
		d.line++
		if isBlank(line) {
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		g := new(ScoredDataGroup)
		if uerr := g.UnmarshalJSON(line); uerr != nil {
			return nil, fmt.Errorf("atropos: line %d: %w", d.line, uerr)
		}
		return g, nil
	}
}

// readLine returns the next line without its newline, reusing d.buf.
func (d *Decoder) readLine() ([]byte, error) {
	d.buf = d.buf[:0]
	for {
		chunk, err := d.r.ReadSlice('\n')
		d.buf = append(d.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(d.buf); n > 0 && d.buf[n-1] == '\n' {
			d.buf = d.buf[:n-1]
		}
		return d.buf, err
	}
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// ReadJSONL calls fn for each group in r, in order, holding one group at a time. It stops
// at the first error, from decoding or from fn, and returns it; it returns nil at the end
// of the input.
func ReadJSONL(r io.Reader, fn func(*ScoredDataGroup) error) error {
	dec := NewDecoder(r)
	for {
		g, err := dec.Decode()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(g); err != nil {
			return err
		}
	}
}
