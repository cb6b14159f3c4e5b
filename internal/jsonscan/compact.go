package jsonscan

import (
	"bytes"
	"encoding/binary"
)

// MaxCompactDepth is how deeply [AppendCompact] lets containers nest: encoding/json's
// limit.
const MaxCompactDepth = 10000

// The states of AppendCompact between tokens.
const (
	wantValue  = iota // a value comes next
	wantKey           // an object's key comes next (after '{' and a member's ',')
	afterValue        // a value ended: ',', a container's end or the document's end
)

// AppendCompact appends src, one JSON value, without the white space outside its
// strings, as encoding/json's Compact writes it, and reports whether src is valid
// under encoding/json's rules: its grammar, escapes in strings checked, nesting at most
// [MaxCompactDepth] deep, and bytes from 0x80 up passed as they are. For invalid input
// it returns dst as it was and false; json.Compact then gives the error. Strings are
// checked eight bytes at a time and copied in runs with what surrounds them, so a
// value that is mostly text, such as a chat message, costs a fraction of
// encoding/json's time, which takes a step per byte.
func AppendCompact(dst, src []byte) ([]byte, bool) {
	orig := len(dst)
	var stackRoom [64]byte
	stack := stackRoom[:0] // the open containers, '{' or '['
	i, from := 0, 0        // src[from:i] is yet to be appended
	// skip drops the white space at i, appending what came before it.
	skip := func() {
		if i < len(src) && isSpace(src[i]) {
			dst = append(dst, src[from:i]...)
			for i < len(src) && isSpace(src[i]) {
				i++
			}
			from = i
		}
	}
	skip()
	state := wantValue
	for {
		if i >= len(src) {
			if state == afterValue && len(stack) == 0 {
				return append(dst, src[from:i]...), true
			}
			return dst[:orig], false
		}
		c := src[i]
		switch state {
		case wantValue:
			state = afterValue
			switch {
			case c == '"':
				if i = stringEnd(src, i); i < 0 {
					return dst[:orig], false
				}
			case c == '{' || c == '[':
				if len(stack) == MaxCompactDepth {
					return dst[:orig], false
				}
				stack = append(stack, c)
				i++
				skip()
				if i < len(src) && src[i] == c+2 { // '}' and ']' follow '{' and '[' by two
					stack = stack[:len(stack)-1]
					i++
				} else if c == '{' {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == 't' || c == 'f' || c == 'n':
				lit := literalFor(c)
				if !bytes.HasPrefix(src[i:], []byte(lit)) {
					return dst[:orig], false
				}
				i += len(lit)
			default:
				end, bad := numberEnd(src, i)
				if bad != "" {
					return dst[:orig], false
				}
				i = end
			}
		case wantKey:
			if c != '"' {
				return dst[:orig], false
			}
			if i = stringEnd(src, i); i < 0 {
				return dst[:orig], false
			}
			skip()
			if i >= len(src) || src[i] != ':' {
				return dst[:orig], false
			}
			i++
			state = wantValue
		case afterValue:
			if len(stack) == 0 {
				return dst[:orig], false // something after the value
			}
			top := stack[len(stack)-1]
			switch c {
			case ',':
				i++
				state = wantValue
				if top == '{' {
					state = wantKey
				}
			case top + 2:
				stack = stack[:len(stack)-1]
				i++
			default:
				return dst[:orig], false
			}
		}
		skip()
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// literalFor is the literal that starts with c: t, f or n.
func literalFor(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

// stringEnd returns the offset just past the string that starts with the quote at
// src[i], or -1 when the string is malformed (a control character, a bad escape, no
// closing quote).
func stringEnd(src []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i++; ; {
		for i+8 <= len(src) { // eight plain bytes at a time
			w := binary.LittleEndian.Uint64(src[i:])
			q, bs := w^('"'*ones), w^('\\'*ones)
			if ((w-0x20*ones)|(q-ones)|(bs-ones))&^w&highs != 0 {
				break // a byte below 0x20, a quote or a backslash among the eight
			}
			i += 8
		}
		for i < len(src) && plainStringByte[src[i]] {
			i++
		}
		if i >= len(src) {
			return -1
		}
		switch src[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(src) {
				return -1
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) || !isHex(src[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a control character
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

// numberEnd returns the offset just past the number that starts at d[i] under the JSON
// grammar, or what is wrong with it.
func numberEnd(d []byte, i int) (end int, bad string) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digitsEnd(d, i)
	default:
		return i, "want a number"
	}
	if i < len(d) && d[i] == '.' {
		if i = digitsEnd(d, i+1); d[i-1] == '.' {
			return i, "bad number"
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digitsEnd(d, i)
		if j == i {
			return i, "bad number"
		}
		i = j
	}
	return i, ""
}

// digitsEnd returns the offset just past the decimal digits from d[i] on.
func digitsEnd(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}
