package vllmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// pyJSON re-serialises a JSON value the way the Hugging Face chat-template `tojson`
// filter does (Python json.dumps with ", " and ": " separators, ensure_ascii=False,
// keys in their original order). Numbers keep their literal text.
func pyJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := pyValue(dec, &b); err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("trailing data after JSON value")
	}
	return b.String(), nil
}

func pyValue(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			b.WriteByte('{')
			for i := 0; dec.More(); i++ {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if i > 0 {
					b.WriteString(", ")
				}
				pyString(b, k.(string))
				b.WriteString(": ")
				if err := pyValue(dec, b); err != nil {
					return err
				}
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := pyValue(dec, b); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		}
		_, err := dec.Token() // closing delimiter
		return err
	case string:
		pyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyString writes s as Python's json.dumps(ensure_ascii=False) would.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				var buf [utf8.UTFMax]byte
				b.Write(buf[:utf8.EncodeRune(buf[:], r)])
			}
		}
	}
	b.WriteByte('"')
}
