package gitpath_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/gitpath"
)

func TestUnquote(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "plain/name.py", want: "plain/name.py"},
		{in: `"conft\145st.py"`, want: "conftest.py"},
		{in: `"caf\303\251.py"`, want: "café.py"},
		{in: `"a\tb\n\"q\"\\"`, want: "a\tb\n\"q\"\\"},
		{in: `"\a\b\f\r\v"`, want: "\a\b\f\r\v"},
		{in: `"x\q"`, bad: true},
		{in: `"x\4"`, bad: true},
		{in: `"x\400"`, bad: true},
		{in: `"unterminated`, bad: true},
		{in: `"a" trailing`, bad: true},
	} {
		got, err := gitpath.Unquote(tc.in)
		if tc.bad {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
}

func TestHeaderNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		a, b string
		ok   bool
	}{
		{in: "a/x.py b/x.py", a: "a/x.py", b: "b/x.py", ok: true},
		{in: "a/s p.py b/s p.py", a: "a/s p.py", b: "b/s p.py", ok: true},
		{in: `"a/t\145sts/x" "b/t\145sts/x"`, a: "a/tests/x", b: "b/tests/x", ok: true},
		{in: `"a/x" b/y`, a: "a/x", b: "b/y", ok: true},
		{in: "a/x.py b/conftest.py", ok: false},   // unquoted halves that differ: cannot be placed
		{in: `a/x "b/conft\145st.py"`, ok: false}, // half quoted
		{in: "a/x b/x b/x", ok: false},            // ambiguous
		{in: `"a/x\q" "b/x"`, ok: false},          // bad escape
	} {
		a, b, ok := gitpath.HeaderNames(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		if ok {
			require.Equal(t, []string{tc.a, tc.b}, []string{a, b}, tc.in)
		}
	}
	require.Equal(t, "x/y", gitpath.StripPrefix("b//x/./y/"))
	require.Equal(t, "", gitpath.StripPrefix("conftest.py"))
}

// cQuote quotes a name as git does with core.quotePath: special and non-ASCII bytes
// as escapes.
func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzUnquote: whatever git quotes, Unquote gives back; nothing panics.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{"conftest.py", "caf\xc3\xa9", "a\"b\\c\td\ne", "\x00\x7f\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := gitpath.Unquote(cQuote(name))
		require.NoError(t, err)
		require.Equal(t, name, got)
		_, _ = gitpath.Unquote(name)
		_, _, _ = gitpath.HeaderNames(name)
		_, _ = gitpath.FileName(name)
	})
}
