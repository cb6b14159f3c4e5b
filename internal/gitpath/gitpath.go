// Package gitpath reads the paths of a git diff's header lines as git itself reads
// them: C-quoted names (with their octal and backslash escapes) are decoded, prefixes
// are stripped, and a header whose names cannot be placed for certain is reported as
// such, never guessed. Package tasks lists a patch's files with it, and package reward
// decides with it which sections of an agent's diff reach grading.
package gitpath

import (
	"errors"
	"strings"
)

// ErrQuote is returned for a quoted name that git would not decode.
var ErrQuote = errors.New("gitpath: malformed quoted name")

// Unquote decodes a name of a diff header. A name that starts with a double quote is
// C-quoted, as git writes names with special bytes (core.quotePath): \a \b \f \n \r
// \t \v \\ \" and three-digit octal escapes; the closing quote must end s. Any other
// name is returned as it is.
func Unquote(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	name, rest, err := unquotePrefix(s)
	if err != nil {
		return "", err
	}
	if rest != "" {
		return "", ErrQuote
	}
	return name, nil
}

// unquotePrefix decodes the quoted name at the start of s and returns the rest.
func unquotePrefix(s string) (name, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", ErrQuote
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			i++
			if i >= len(s) {
				return "", "", ErrQuote
			}
			switch e := s[i]; e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '\\', '"':
				b.WriteByte(e)
			case '0', '1', '2', '3':
				if i+2 >= len(s) || !octal(s[i+1]) || !octal(s[i+2]) {
					return "", "", ErrQuote
				}
				b.WriteByte((e-'0')<<6 | (s[i+1]-'0')<<3 | (s[i+2] - '0'))
				i += 2
			default:
				return "", "", ErrQuote
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", ErrQuote
}

func octal(c byte) bool { return c >= '0' && c <= '7' }

// HeaderNames returns the two names of a "diff --git A B" line, given the part after
// "diff --git ", with their prefixes ("a/", "b/") still on. Quoted names are decoded.
// Unquoted names with spaces are placed only when both halves name the same path (as
// git does for a diff without renames); a line that cannot be split for certain
// returns ok false.
func HeaderNames(rest string) (a, b string, ok bool) {
	rest = strings.TrimRight(rest, "\r")
	if strings.HasPrefix(rest, `"`) {
		a, tail, err := unquotePrefix(rest)
		if err != nil || !strings.HasPrefix(tail, " ") {
			return "", "", false
		}
		b, err := Unquote(tail[1:])
		if err != nil {
			return "", "", false
		}
		return a, b, true
	}
	if strings.Contains(rest, `"`) {
		return "", "", false
	}
	n := len(rest)
	if n%2 == 0 {
		return "", "", false
	}
	half := (n - 1) / 2
	if rest[half] != ' ' {
		return "", "", false
	}
	a, b = rest[:half], rest[half+1:]
	if StripPrefix(a) == "" || StripPrefix(a) != StripPrefix(b) {
		return "", "", false
	}
	return a, b, true
}

// FileName returns the name of a "--- X" or "+++ X" line, given X: decoded when
// quoted, else cut at a tab (git ends a name that holds a space with one); "" for
// /dev/null. ok is false for a quoted name git would not decode.
func FileName(x string) (name string, ok bool) {
	x = strings.TrimRight(x, "\r")
	if strings.HasPrefix(x, `"`) {
		name, rest, err := unquotePrefix(x)
		if err != nil || (rest != "" && !strings.HasPrefix(rest, "\t")) {
			return "", false
		}
		return name, true
	}
	if i := strings.IndexByte(x, '\t'); i >= 0 {
		x = x[:i]
	}
	if x == "/dev/null" {
		return "", true
	}
	return x, true
}

// StripPrefix removes the first component of a prefixed name ("a/x/y" is "x/y"), as
// git apply -p1 does, repeated slashes squashed first as git squashes them, and
// cleans the rest; "" when nothing is left.
func StripPrefix(name string) string {
	name = Clean(name)
	i := strings.IndexByte(name, '/')
	if i < 0 {
		return ""
	}
	return Clean(name[i+1:])
}

// Clean is the path git writes for name: repeated slashes squashed, "." components
// and a trailing slash dropped. ".." is kept, for the caller to refuse.
func Clean(name string) string {
	if name == "" {
		return ""
	}
	abs := strings.HasPrefix(name, "/")
	var parts []string
	for p := range strings.SplitSeq(name, "/") {
		if p == "" || p == "." {
			continue
		}
		parts = append(parts, p)
	}
	out := strings.Join(parts, "/")
	if abs {
		return "/" + out
	}
	return out
}
