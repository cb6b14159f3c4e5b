package jsonscan_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// walk reads one value with the Scanner's methods, choosing among them by the bytes
// of ops in turn, and writes what each call returned to out. Run over a document in
// memory and over the same document streamed, it must write the same.
type walker struct {
	s   *jsonscan.Scanner
	ops []byte
	i   int
	out *strings.Builder
}

func (w *walker) op() byte {
	if len(w.ops) == 0 {
		return 0
	}
	w.i++
	return w.ops[w.i%len(w.ops)]
}

func (w *walker) value(depth int) error {
	if depth > 64 {
		return errors.New("deep")
	}
	s := w.s
	if depth == 0 {
		s.Fill() // Peek below does not read on
	}
	switch op := w.op(); op % 8 {
	case 1:
		raw, err := s.Skip()
		fmt.Fprintf(w.out, "skip %q;", raw)
		return err
	case 2:
		var v any
		err := s.UnmarshalNext(&v)
		fmt.Fprintf(w.out, "unmarshal %v;", v)
		return err
	case 3:
		ids, err := s.Int32s()
		fmt.Fprintf(w.out, "int32s %v;", ids)
		return err
	}
	switch c := s.Peek(); c {
	case '{':
		return s.Object(false, func(k []byte) error {
			fmt.Fprintf(w.out, "key %q;", k)
			if w.op()%5 == 0 && s.KnownKey(`"x":`) {
				w.out.WriteString("known x;")
			}
			return w.value(depth + 1)
		})
	case '[':
		return s.Array(false, func(i int) error {
			fmt.Fprintf(w.out, "elem %d;", i)
			return w.value(depth + 1)
		})
	case '"':
		if w.op()%2 == 0 {
			raw, esc, err := s.RawString()
			fmt.Fprintf(w.out, "raw %q %v;", raw, esc)
			return err
		}
		v, err := s.String()
		fmt.Fprintf(w.out, "string %q;", v)
		return err
	case 'n':
		fmt.Fprintf(w.out, "null %v;", s.Null())
		return nil
	case 't', 'f':
		if depth == 0 {
			s.Buffer() // Literal reads within a value: at the top, the value must be whole
		}
		fmt.Fprintf(w.out, "lit %v %v;", s.Literal("true"), s.Literal("false"))
		return nil
	default:
		switch w.op() % 3 {
		case 0:
			f, err := s.Float32()
			fmt.Fprintf(w.out, "float32 %v;", f)
			return err
		case 1:
			n, err := s.Int32()
			fmt.Fprintf(w.out, "int32 %v;", n)
			return err
		}
		num, err := s.Number()
		fmt.Fprintf(w.out, "number %q;", num)
		return err
	}
}

// trace walks the document s reads and returns what the walk wrote, with how it ended.
func trace(s *jsonscan.Scanner, ops []byte) string {
	var out strings.Builder
	w := &walker{s: s, ops: ops, out: &out}
	err := w.value(0)
	if err == nil {
		err = s.End()
	}
	if errors.Is(err, jsonscan.ErrUnexpectedEnd) {
		err = jsonscan.ErrUnexpectedEnd // the streaming error may wrap it differently
	}
	fmt.Fprintf(&out, "| %v at %d", err, s.Offset())
	return out.String()
}

// readers are the ways a stream is cut: one byte per read, and half of what is asked.
var readers = map[string]func([]byte) io.Reader{
	"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
	"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
}

func checkStreamLikeMemory(t *testing.T, data, ops []byte) {
	t.Helper()
	mem := &jsonscan.Scanner{Data: data, MaxDepth: 10000}
	want := trace(mem, ops)
	for name, r := range readers {
		for _, window := range []int{1, 2, 7, 64} {
			st := jsonscan.NewStream(r(data), window)
			st.MaxDepth = 10000
			if got := trace(st, ops); got != want {
				t.Fatalf("%q, ops %v, %s, window %d:\nstream %s\nmemory %s", data, ops, name, window, got, want)
			}
			require.NoError(t, st.ReadErr())
		}
	}
}

var streamSeeds = []string{
	`{"a":[1,{"b":null}],"c":"}"}`, `[true,false,null,-1.5e3,"x\"]"]`, `"\q"`, `[1,]`, `{"a" 1}`,
	`[[[[]]]]`, `{"a":{"b":{"c":[]}}}`, ` 1 `, `[01]`, `{"a":1,}`, "[\"\x00\"]", `nul`, `[NaN]`,
	`[12345678,123456789,1234567890,-1,0,null, 7 ]`, `{"x":1,"x":[2,3]}`, `"caf\u00e9\ud83d\ude00"`,
	`{"logprob":-0.125,"rank":1,"decoded_token":"\n"}`, `123456789012345678901234567890e-5`,
	`{"\u0061":"b"}`, `[1e, 2]`, `[-]`, "[\"abc\\", `{"a":"b"} x`, `   `, `[1.5,2.25e+1,-0.0]`,
}

func TestStreamReadsLikeMemory(t *testing.T) {
	for _, doc := range streamSeeds {
		for _, ops := range [][]byte{nil, {0}, {1}, {2}, {3}, {4, 5, 6, 7, 0}, {3, 0, 9, 17, 2}} {
			checkStreamLikeMemory(t, []byte(doc), ops)
		}
	}
}

func FuzzStreamReadsLikeMemory(f *testing.F) {
	for i, doc := range streamSeeds {
		f.Add([]byte(doc), []byte{byte(i), byte(i * 7), byte(i * 13)})
	}
	f.Fuzz(func(t *testing.T, data, ops []byte) {
		checkStreamLikeMemory(t, data, ops)
	})
}

// A long document through a small window: the window slides rather than grows, and
// grows only for a value longer than it.
func TestStreamWindowStaysSmall(t *testing.T) {
	var doc bytes.Buffer
	doc.WriteString("[")
	for i := range 20000 {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"%d":{"logprob":-%d.5,"rank":%d}}`, i, i%7, i%50+1)
	}
	doc.WriteString(`,"` + strings.Repeat("z", 5000) + `"]`)
	s := jsonscan.NewStream(bytes.NewReader(doc.Bytes()), 1024)
	maxWindow := 0
	n := 0
	err := s.Array(false, func(i int) error {
		maxWindow = max(maxWindow, cap(s.Data))
		if i == 20000 {
			str, err := s.String()
			require.Len(t, str, 5000)
			return err
		}
		n++
		_, err := s.Skip()
		return err
	})
	require.NoError(t, err)
	require.NoError(t, s.End())
	require.Equal(t, 20000, n)
	// Finding the array too long to take whole reads 16 KiB of it: the window grows
	// to 32 KiB, and no further over 20,000 values and a 5,000-byte string.
	require.Equal(t, 32<<10, maxWindow, "the window slid over 20,000 small values")
	require.Equal(t, 32<<10, cap(s.Data))
	require.Equal(t, doc.Len(), s.Offset())
}

// A read that fails ends the document: the call reports it, and ReadErr names it.
func TestStreamReadError(t *testing.T) {
	broken := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader(`{"a":[1,2,`), iotest.ErrReader(broken))
	s := jsonscan.NewStream(r, 4)
	_, err := s.Skip()
	require.ErrorIs(t, err, broken)
	require.ErrorIs(t, s.ReadErr(), broken)

	// a reader that returns nothing, forever
	s = jsonscan.NewStream(zeroReader{}, 4)
	_, err = s.Skip()
	require.ErrorIs(t, err, io.ErrNoProgress)
	require.ErrorIs(t, s.ReadErr(), io.ErrNoProgress)

	// a clean end of stream is no read error
	s = jsonscan.NewStream(strings.NewReader(`[1,2`), 4)
	_, err = s.Skip()
	require.ErrorIs(t, err, jsonscan.ErrUnexpectedEnd)
	require.NoError(t, s.ReadErr())
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// Syntax errors give their offset from the start of the document, not of the window.
func TestStreamErrorOffset(t *testing.T) {
	doc := `[` + strings.Repeat(`1,`, 5000) + `x]`
	s := jsonscan.NewStream(strings.NewReader(doc), 16)
	_, err := s.Skip()
	var se *jsonscan.SyntaxError
	require.ErrorAs(t, err, &se)
	require.Equal(t, strings.Index(doc, "x"), se.Offset)
}
