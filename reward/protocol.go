package reward

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// request is what the relay needs of a message from the test process.
type request struct {
	op  string
	id  int64
	why string
}

// forSolution reports whether the message is a request for the solution process
// (the others, "hello", "done" and "bad_reply", are for the relay).
func (r request) forSolution() bool {
	return r.op != "hello" && r.op != "done" && r.op != "bad_reply"
}

// parseRequest reads the op and id of a message from the test process.
func parseRequest(line []byte) (request, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return request{}, err
	}
	var r request
	if err := json.Unmarshal(m["op"], &r.op); err != nil {
		return request{}, fmt.Errorf("op: %w", err)
	}
	switch r.op {
	case "hello", "done":
		return r, nil
	case "bad_reply":
		_ = json.Unmarshal(m["why"], &r.why)
		return r, nil
	}
	if err := json.Unmarshal(m["id"], &r.id); err != nil {
		return request{}, fmt.Errorf("id: %w", err)
	}
	return r, nil
}

// checkReply checks a message from the solution process: a JSON object with exactly
// the keys "id" (equal to id) and "ok" (a value) or "exc" (a builtin exception's name
// and a tuple of arguments, and the exception's class when the solution defined
// it), and "out" when a call changed arguments in place. Values follow the grammar of harness/codec.py: null,
// true, false or [tag, payload] in canonical form, containers at most MaxDepth deep,
// set elements and dict keys of hashable kinds. The test process decodes the reply
// again, as strictly; the two checks agree, so the relay and the tests see the same
// reply.
func checkReply(line []byte, id int64) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("text after the JSON object")
	}
	want := 2
	if out, ok := m["out"]; ok {
		if err := checkChanged(out); err != nil {
			return err
		}
		want = 3
	}
	if len(m) != want {
		return fmt.Errorf("%d keys, want %d", len(m), want)
	}
	got, ok := m["id"].(json.Number)
	if !ok || got.String() != fmt.Sprint(id) {
		return fmt.Errorf("id %v, want %d", m["id"], id)
	}
	if v, ok := m["ok"]; ok {
		_, err := checkValue(v, 0)
		return err
	}
	exc, ok := m["exc"].([]any)
	if !ok || len(exc) != 2 && len(exc) != 3 {
		return errors.New(`neither "ok" nor "exc"`)
	}
	if len(exc) == 3 {
		// The exception's class, when the solution defined it.
		if c, ok := exc[2].([]any); !ok || len(c) != 2 || c[0] != "x" {
			return errors.New("an exception class that is not one")
		}
		if _, err := checkValue(exc[2], 0); err != nil {
			return err
		}
	}
	name, ok := exc[0].(string)
	if !ok || !identifier.MatchString(name) {
		return fmt.Errorf("exception name %v", exc[0])
	}
	if args, ok := exc[1].([]any); !ok || len(args) != 2 || args[0] != "t" {
		return errors.New("exception arguments are not a tuple")
	}
	_, err := checkValue(exc[1], 0)
	return err
}

// checkChanged checks the "out" of a reply: the arguments a call changed in place, a
// non-empty list of [position or keyword, value]. The test process checks that each
// was passed and can take the value.
func checkChanged(v any) error {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return errors.New(`"out" is not a list of changed arguments`)
	}
	for _, it := range items {
		kv, ok := it.([]any)
		if !ok || len(kv) != 2 {
			return errors.New("a changed argument is not a pair")
		}
		switch k := kv[0].(type) {
		case json.Number:
			if i, err := k.Int64(); err != nil || i < 0 {
				return fmt.Errorf("changed argument %v", k)
			}
		case string:
		default:
			return fmt.Errorf("changed argument %v", kv[0])
		}
		if _, err := checkValue(kv[1], 0); err != nil {
			return err
		}
	}
	return nil
}

var (
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,99}$`)
	hexInt     = regexp.MustCompile(`^-?0x(0|[1-9a-f][0-9a-f]*)$`)
	hexFloat   = regexp.MustCompile(`^(-?0x[01]\.[0-9a-f]+p[+-][0-9]+|-?inf|nan)$`)
	hexBytes   = regexp.MustCompile(`^([0-9a-f]{2})*$`)
)

// checkValue checks one encoded value and reports whether it is hashable.
func checkValue(v any, depth int) (hashable bool, err error) {
	switch v := v.(type) {
	case nil, bool:
		return true, nil
	case []any:
		if len(v) != 2 {
			return false, errors.New("a value is not a [tag, payload] pair")
		}
		tag, _ := v[0].(string)
		p := v[1]
		if depth > MaxDepth {
			return false, fmt.Errorf("values nested deeper than %d", MaxDepth)
		}
		switch tag {
		case "i", "f", "s", "y":
			s, ok := p.(string)
			if !ok || tag == "i" && !hexInt.MatchString(s) || tag == "f" && !hexFloat.MatchString(s) ||
				tag == "y" && !hexBytes.MatchString(s) {
				return false, fmt.Errorf("bad %q payload", tag)
			}
			return true, nil
		case "h":
			n, ok := p.(json.Number)
			if i, err := n.Int64(); !ok || err != nil || i < 0 {
				return false, errors.New("bad handle")
			}
			return true, nil
		case "x":
			// An exception class: [handle, base, name], base the name of a builtin
			// exception or the parent class.
			x, ok := p.([]any)
			if !ok || len(x) != 3 {
				return false, errors.New(`bad "x" payload`)
			}
			if _, err := checkValue([]any{"h", x[0]}, depth); err != nil {
				return false, err
			}
			if name, ok := x[2].(string); !ok || !identifier.MatchString(name) {
				return false, fmt.Errorf("exception class name %v", x[2])
			}
			if base, ok := x[1].(string); ok {
				if !identifier.MatchString(base) {
					return false, fmt.Errorf("exception base %q", base)
				}
				return true, nil
			}
			if b, ok := x[1].([]any); !ok || len(b) != 2 || b[0] != "x" {
				return false, errors.New("an exception class's base is not a class")
			}
			if _, err := checkValue(x[1], depth+1); err != nil {
				return false, err
			}
			return true, nil
		case "t", "l", "S", "F":
			items, ok := p.([]any)
			if !ok {
				return false, fmt.Errorf("bad %q payload", tag)
			}
			all := true
			for _, e := range items {
				h, err := checkValue(e, depth+1)
				if err != nil {
					return false, err
				}
				if (tag == "S" || tag == "F") && !h {
					return false, errors.New("an unhashable set element")
				}
				all = all && h
			}
			return tag == "F" || tag == "t" && all, nil
		case "d":
			items, ok := p.([]any)
			if !ok {
				return false, errors.New(`bad "d" payload`)
			}
			for _, e := range items {
				kv, ok := e.([]any)
				if !ok || len(kv) != 2 {
					return false, errors.New("a dict item is not a pair")
				}
				h, err := checkValue(kv[0], depth+1)
				if err != nil {
					return false, err
				}
				if !h {
					return false, errors.New("an unhashable dict key")
				}
				if _, err := checkValue(kv[1], depth+1); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		return false, fmt.Errorf("unknown tag %q", tag)
	}
	return false, fmt.Errorf("a bare JSON %T is not a value", v)
}
