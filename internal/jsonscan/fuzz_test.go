package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// FuzzString checks String against encoding/json's Decoder reading the same bytes: both
// accept the same strings, end at the same offset and give the same value (invalid
// UTF-8 in a string without escapes is returned as it is, where encoding/json would
// replace it, so values are compared only when the bytes are valid UTF-8).
func FuzzString(f *testing.F) {
	for _, s := range []string{
		`"abc"`, ` "a\"b" 1`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800x"`, `"a\qb"`,
		`"\u12"`, `"abc`, `"a\`, "\"a\x01\"", `"\/\b\f\n\r\t"`, `1`, ``, "\"\xff\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := jsonscan.Scanner{Data: data}
		got, err := s.String()

		dec := json.NewDecoder(bytes.NewReader(data))
		tok, refErr := dec.Token()
		want, isString := tok.(string)
		refOK := refErr == nil && isString
		if (err == nil) != refOK {
			t.Fatalf("%q: String error %v, encoding/json %v (%T)", data, err, refErr, tok)
		}
		if err != nil {
			var se *jsonscan.SyntaxError
			if !errors.Is(err, jsonscan.ErrUnexpectedEnd) && !errors.As(err, &se) {
				t.Fatalf("%q: error %v is neither ErrUnexpectedEnd nor a SyntaxError", data, err)
			}
			return
		}
		if int64(s.Pos) != dec.InputOffset() {
			t.Fatalf("%q: ends at %d, encoding/json at %d", data, s.Pos, dec.InputOffset())
		}
		if utf8.ValidString(got) && got != want {
			t.Fatalf("%q: %q, encoding/json %q", data, got, want)
		}
	})
}

// FuzzNumber checks the number grammar against encoding/json: ValidNumber accepts
// exactly the numbers encoding/json accepts as a whole document, and what Number reads
// is one of them, taken from the start of the input.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "12", "1.5e+3", "01", "-", "1.", ".5", "+1", "1e", "0x10", "1_0", "Inf", "NaN", "-1E-07", " 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		isNumber := len(data) > 0 && (data[0] == '-' || data[0] >= '0' && data[0] <= '9') &&
			data[len(data)-1] >= '0' && data[len(data)-1] <= '9'
		want := isNumber && json.Valid(data)
		if got := jsonscan.ValidNumber(data); got != want {
			t.Fatalf("ValidNumber(%q) = %v, encoding/json %v", data, got, want)
		}
		s := jsonscan.Scanner{Data: data}
		num, err := s.Number()
		if err != nil {
			return
		}
		if !jsonscan.ValidNumber(num) {
			t.Fatalf("Number(%q) read %q, not a number", data, num)
		}
		if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), num) {
			t.Fatalf("Number(%q) read %q, not from the start", data, num)
		}
	})
}

// FuzzSkip checks Skip against encoding/json's Valid: every valid document is skipped
// whole, and whatever Skip accepts whole is valid unless it holds a backslash (Skip
// does not check escapes). It also checks that Skip never panics on truncated input.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,{"b":null}],"c":"}"}`, `[true,false,null,-1.5e3,"x\"]"]`, `"\q"`, `[1,]`, `{"a" 1}`,
		`[[[[]]]]`, `{"a":{"b":{"c":[]}}}`, ` 1 `, `[01]`, `{"a":1,}`, "[\"\x00\"]", `nul`, `[NaN]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := jsonscan.Scanner{Data: data, MaxDepth: 10000}
		raw, err := s.Skip()
		if err == nil {
			err = s.End()
		}
		valid := json.Valid(data)
		if valid && err != nil {
			t.Fatalf("%q is valid JSON, Skip: %v", data, err)
		}
		if err == nil {
			if !valid && !bytes.Contains(data, []byte(`\`)) {
				t.Fatalf("Skip accepted invalid %q", data)
			}
			if !bytes.Equal(raw, bytes.TrimLeft(bytes.TrimRight(data, " \t\r\n"), " \t\r\n")) {
				t.Fatalf("Skip returned %q of %q", raw, data)
			}
		}
		for i := range data {
			p := jsonscan.Scanner{Data: data[:i]}
			if _, err := p.Skip(); err == nil && valid && i > 0 && !json.Valid(data[:i]) && p.End() == nil {
				t.Fatalf("prefix %q accepted", data[:i])
			}
		}
	})
}
