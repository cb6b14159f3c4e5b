package vllmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
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

// member is one key and raw value of a JSON object, in document order.
type member struct {
	key string
	val json.RawMessage
}

// objectMembers reads a JSON object's members in document order.
func objectMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want a JSON object")
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return out, nil
}

// toolJSON renders one tool definition as the template sees it: vLLM validates each
// tool into its pydantic model and passes model_dump() to the template, so the tool
// becomes {"type", "function": {"name", "description", "parameters", extras…},
// extras…}, with an absent description or parameters written as null and extra keys
// after the declared ones, in request order.
func toolJSON(raw []byte) (string, error) {
	toolJSONCache.mu.RLock()
	r, ok := toolJSONCache.m[string(raw)]
	toolJSONCache.mu.RUnlock()
	if ok {
		return r.text, r.err
	}
	text, err := renderToolJSON(raw)
	toolJSONCache.mu.Lock()
	if len(toolJSONCache.m) >= 1<<10 {
		clear(toolJSONCache.m)
	}
	toolJSONCache.m[string(raw)] = toolJSONResult{text, err}
	toolJSONCache.mu.Unlock()
	return text, err
}

// toolJSONCache remembers toolJSON's results: the same tool definitions come with
// every request of a conversation, and the rendering is a pure function of their bytes.
var toolJSONCache = struct {
	mu sync.RWMutex
	m  map[string]toolJSONResult
}{m: map[string]toolJSONResult{}}

type toolJSONResult struct {
	text string
	err  error
}

func renderToolJSON(raw []byte) (string, error) {
	top, err := objectMembers(raw)
	if err != nil {
		return "", err
	}
	typ := json.RawMessage(`"function"`)
	var fn json.RawMessage
	var extra []member
	for _, m := range top {
		switch m.key {
		case "type":
			typ = m.val
		case "function":
			fn = m.val
		default:
			extra = append(extra, m)
		}
	}
	var t string
	if json.Unmarshal(typ, &t) != nil || t != "function" {
		return "", fmt.Errorf("type must be \"function\", got %s", typ)
	}
	if fn == nil {
		return "", fmt.Errorf("function: Field required")
	}
	fields, err := objectMembers(fn)
	if err != nil {
		return "", fmt.Errorf("function: %v", err)
	}
	declared := map[string]json.RawMessage{"description": json.RawMessage("null"), "parameters": json.RawMessage("null")}
	var fnExtra []member
	for _, m := range fields {
		switch m.key {
		case "name", "description", "parameters":
			declared[m.key] = m.val
		default:
			fnExtra = append(fnExtra, m)
		}
	}
	var name string
	if declared["name"] == nil || json.Unmarshal(declared["name"], &name) != nil {
		return "", fmt.Errorf("function.name: a string is required")
	}
	var b strings.Builder
	write := func(first bool, key string, val json.RawMessage) error {
		if !first {
			b.WriteString(", ")
		}
		pyString(&b, key)
		b.WriteString(": ")
		s, err := pyJSON(val)
		if err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
		b.WriteString(s)
		return nil
	}
	b.WriteString(`{"type": "function", "function": {`)
	for i, k := range []string{"name", "description", "parameters"} {
		if err := write(i == 0, k, declared[k]); err != nil {
			return "", err
		}
	}
	for _, m := range fnExtra {
		if err := write(false, m.key, m.val); err != nil {
			return "", err
		}
	}
	b.WriteString("}")
	for _, m := range extra {
		if err := write(false, m.key, m.val); err != nil {
			return "", err
		}
	}
	b.WriteString("}")
	return b.String(), nil
}
