package reward

import (
	"encoding/json"
	"regexp"
	"strings"
)

// replyKey is the index of each key of a reply, -1 for another key.
func replyKey(key string) int {
	switch key {
	case "id":
		return 0
	case "ok":
		return 1
	case "exc":
		return 2
	case "out":
		return 3
	}
	return -1
}

// reply reads a message from the solution process and checks it: a JSON object with
// exactly the keys "id" (an integer, which the relay compares with the request's) and
// "ok" (a value) or "exc" (an exception), and "out" when a call changed arguments in
// place, each once. An exception is [name, args], [name, args, class] or [name, args,
// class or null, attributes]: the name of a builtin exception, its arguments as a
// tuple, the exception's class when the solution defined it, and the attributes the
// exception carried as a non-empty list of [name, value]. Values follow the grammar of
// harness/codec.py: null, true, false or [tag, payload] in canonical form, containers
// at most MaxDepth deep, set elements and dict keys of hashable kinds; strings are
// ASCII, as the harness writes them. The test process decodes the reply again, as
// strictly; the two checks agree, so the relay and the tests see the same reply.
func (r *msgReader) reply() message {
	r.start()
	if c := r.get(); c != '{' {
		r.fail("not a JSON object")
	}
	var id int64
	var seen [4]bool // by replyKey
	for more := r.members(); more && r.err == nil; more = r.more('}') {
		key := r.word(3)
		r.expect(':')
		i := replyKey(key)
		if i < 0 {
			r.fail("key %q", key)
			break
		}
		if seen[i] {
			r.fail("key %q twice", key)
		}
		seen[i] = true
		switch key {
		case "id":
			id = r.integer()
		case "ok":
			r.value(0)
		case "exc":
			r.exception()
		case "out":
			r.changed()
		}
	}
	switch {
	case r.err != nil:
	case !seen[0]:
		r.fail(`no "id"`)
	case seen[1] == seen[2]:
		r.fail(`neither "ok" nor "exc", or both`)
	}
	m := r.end()
	m.id = id
	return m
}

// exception reads the "exc" of a reply.
func (r *msgReader) exception() {
	r.expect('[')
	r.identifier()
	r.expect(',')
	if tag, _ := r.value(0); tag != 't' && r.err == nil {
		r.fail("exception arguments are not a tuple")
	}
	if !r.more(']') {
		return
	}
	nullClass := r.ws() == 'n'
	if tag, _ := r.value(0); tag != 'x' && !nullClass && r.err == nil {
		r.fail("an exception class that is not one")
	}
	if !r.more(']') {
		if nullClass {
			r.fail("an exception class that is not one")
		}
		return
	}
	// The exception's attributes: [name, value] pairs.
	if !r.begin() {
		r.fail("no exception attributes")
		return
	}
	for r.err == nil {
		r.expect('[')
		if name := r.identifier(); strings.HasPrefix(name, "__") {
			r.fail("exception attribute %q", name)
		}
		r.expect(',')
		r.value(0)
		r.expect(']')
		if !r.more(']') {
			break
		}
	}
	r.expect(']')
}

// changed reads the "out" of a reply: the arguments a call changed in place, a
// non-empty list of [position or keyword, value]. The test process checks that each
// was passed and can take the value.
func (r *msgReader) changed() {
	if !r.begin() {
		r.fail(`"out" is not a list of changed arguments`)
		return
	}
	for r.err == nil {
		r.expect('[')
		if r.ws() == '"' {
			r.str(nil)
		} else if r.integer() < 0 {
			r.fail("a negative argument position")
		}
		r.expect(',')
		r.value(0)
		r.expect(']')
		if !r.more(']') {
			return
		}
	}
}

var hexFloat = regexp.MustCompile(`^(-?0x[01]\.[0-9a-f]+p[+-][0-9]+|-?inf|nan)$`)

// value reads one encoded value and returns its tag (0 for null, true and false) and
// whether it is hashable.
func (r *msgReader) value(depth int) (tag byte, hashable bool) {
	switch c := r.ws(); c {
	case 'n':
		r.literal("null")
		return 0, true
	case 't':
		r.literal("true")
		return 0, true
	case 'f':
		r.literal("false")
		return 0, true
	case '[':
	default:
		r.get()
		r.fail("a bare JSON value at byte %d", r.n)
		return 0, false
	}
	if depth > MaxDepth {
		r.fail("values nested deeper than %d (reward.MaxDepth)", MaxDepth)
		return 0, false
	}
	r.get()
	t := r.word(1)
	if len(t) != 1 {
		r.fail("a value is not a [tag, payload] pair")
		return 0, false
	}
	tag = t[0]
	r.expect(',')
	hashable = true
	switch tag {
	case 'i':
		r.hexInt()
	case 'f':
		if s := r.word(64); r.err == nil && !hexFloat.MatchString(s) {
			r.fail(`bad "f" payload`)
		}
	case 's':
		r.str(nil)
	case 'y':
		n := 0
		r.str(func(c byte) bool { n++; return isLowerHex(c) })
		if n%2 != 0 {
			r.fail(`bad "y" payload`)
		}
	case 'h':
		if r.integer() < 0 {
			r.fail("bad handle")
		}
	case 'x':
		// An exception class: [handle, base, name], base the name of a builtin
		// exception or the parent class.
		r.expect('[')
		if r.integer() < 0 {
			r.fail("bad handle")
		}
		r.expect(',')
		if r.ws() == '"' {
			r.identifier()
		} else if base, _ := r.value(depth + 1); base != 'x' && r.err == nil {
			r.fail("an exception class's base is not a class")
		}
		r.expect(',')
		r.identifier()
		r.expect(']')
	case 't', 'l', 'S', 'F':
		for more := r.begin(); more && r.err == nil; more = r.more(']') {
			_, h := r.value(depth + 1)
			if (tag == 'S' || tag == 'F') && !h && r.err == nil {
				r.fail("an unhashable set element")
			}
			hashable = hashable && h
		}
		hashable = tag == 'F' || tag == 't' && hashable
	case 'd':
		for more := r.begin(); more && r.err == nil; more = r.more(']') {
			r.expect('[')
			if _, h := r.value(depth + 1); !h && r.err == nil {
				r.fail("an unhashable dict key")
			}
			r.expect(',')
			r.value(depth + 1)
			r.expect(']')
		}
		hashable = false
	default:
		r.fail("unknown tag %q", tag)
	}
	r.expect(']')
	return tag, hashable
}

// literal reads null, true or false.
func (r *msgReader) literal(lit string) {
	for i := 0; i < len(lit); i++ {
		if r.get() != lit[i] {
			r.fail("a bad literal at byte %d", r.n)
			return
		}
	}
}

// hexInt reads an "i" payload: -?0x(0|[1-9a-f][0-9a-f]*), as Python's hex() writes it
// (so not "-0x0").
func (r *msgReader) hexInt() {
	const (
		start = iota
		minus
		zero
		x
		done // 0x0
		digits
	)
	state, neg := start, false
	r.str(func(c byte) bool {
		switch {
		case state == start && c == '-':
			state, neg = minus, true
		case (state == start || state == minus) && c == '0':
			state = zero
		case state == zero && c == 'x':
			state = x
		case state == x && c == '0' && !neg:
			state = done
		case state == x && c != '0' && isLowerHex(c), state == digits && isLowerHex(c):
			state = digits
		default:
			return false
		}
		return true
	})
	if r.err == nil && state != done && state != digits {
		r.fail(`bad "i" payload`)
	}
}

// request reads what the relay needs of a message from the test process: its op, id,
// and, for the relay's own messages, why and size. The test process is trusted: the
// rest of a request is skipped, checked only for its structure.
func (r *msgReader) request() message {
	r.start()
	var q request
	if c := r.get(); c != '{' {
		r.fail("not a JSON object")
	}
	for more := r.members(); more && r.err == nil; more = r.more('}') {
		key := r.word(16)
		r.expect(':')
		switch key {
		case "op":
			q.op = r.word(16)
		case "id":
			q.id = r.integer()
		case "size":
			q.size = r.integer()
		case "why":
			q.why = r.text(2000)
		default:
			r.skip()
		}
	}
	if r.err == nil && q.op == "" {
		r.fail(`no "op"`)
	}
	m := r.end()
	m.req = q
	return m
}

// text reads a string and decodes its escapes; longer strings are cut at max bytes.
func (r *msgReader) text(max int) string {
	raw := []byte{'"'}
	r.str(func(c byte) bool {
		if len(raw) < max {
			raw = append(raw, c)
		}
		return true
	})
	for len(raw) > 1 && raw[len(raw)-1] == '\\' { // a cut escape
		raw = raw[:len(raw)-1]
	}
	var s string
	if json.Unmarshal(append(raw, '"'), &s) != nil {
		return string(raw[1:])
	}
	return s
}

// skip reads a JSON value of any shape without keeping it.
func (r *msgReader) skip() {
	switch c := r.ws(); c {
	case '"':
		r.str(nil)
		return
	case '[', '{':
	default:
		for {
			switch r.peek() {
			case ',', '}', ']', ' ', '\t', '\r', '\n', 0:
				return
			}
			r.get()
		}
	}
	for depth := 0; r.err == nil; {
		switch c := r.ws(); c {
		case '"':
			r.str(nil)
		case '[', '{':
			r.get()
			depth++
		case ']', '}':
			r.get()
			if depth--; depth == 0 {
				return
			}
		case '\n', 0:
			r.get()
			r.fail("a message that ends inside a value")
		default:
			r.get()
		}
	}
}
