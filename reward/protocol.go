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
// and a tuple of arguments). Values follow the grammar of harness/codec.py: null,
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
	if len(m) != 2 {
		return fmt.Errorf("%d keys, want 2", len(m))
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
	if !ok || len(exc) != 2 {
		return errors.New(`neither "ok" nor "exc"`)
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
