package reward

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/agentic-opd/agenticopd/rollout"
)

// configAction is what grading did with an agent's change to setup.cfg or
// pyproject.toml.
type configAction int

const (
	// configKept: the change leaves pytest's sections as they were.
	configKept configAction = iota
	// configRewritten: pytest's sections were put back as they were, the rest of
	// the agent's file kept.
	configRewritten
	// configRestored: the whole file was put back (its pytest sections could not be
	// separated from the rest for certain).
	configRestored
)

// guardPytestConfig keeps an agent's change to a setup.cfg or pyproject.toml (at any
// depth: pytest looks for its configuration in the directories above the tests) from
// changing pytest's configuration there ([tool:pytest] and [pytest] in setup.cfg,
// the tool.pytest table in pyproject.toml): addopts = -p module would load code of
// the agent as a plugin. The start's pytest sections are put back in the agent's
// file; where that cannot be done for certain (a file that does not parse, sections
// that cannot be cut out line by line, a symlink, a file over maxConfigFile), the
// whole file is put back.
func guardPytestConfig(ctx context.Context, gs rollout.Sandbox, startCommit, p string, isNew bool) (configAction, error) {
	// What git wrote at p (a file, a link, something else or nothing), read by the
	// shell, not through gs.FS, which would follow a link; then the start's text.
	script := "if [ -L " + quote("./"+p) + " ]; then printf L; elif [ -f " + quote("./"+p) + " ]; then printf F; " +
		"elif [ -e " + quote("./"+p) + " ]; then printf O; else printf N; fi; printf '\\0/\\0'"
	if !isNew {
		script += "; " + git + "cat-file blob " + quote(startCommit+":"+p)
	}
	out, err := listOut(ctx, gs, script, nil)
	if err != nil {
		return 0, err
	}
	kind, start, ok := strings.Cut(string(out), sectionSep)
	if !ok {
		return 0, fmt.Errorf("reading %s: no separator", p)
	}
	switch kind {
	case "N":
		if same, _ := samePytestConfig(p, start, ""); same {
			return configKept, nil
		}
		return configRestored, nil
	case "F":
	default: // a link (it could point at .git/config or a test file) or no file
		return configRestored, nil
	}
	fsys := gs.FS()
	fi, err := fs.Stat(fsys, p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxConfigFile {
		return configRestored, nil
	}
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return configRestored, nil
	}
	agent := string(data)
	if same, ok := samePytestConfig(p, start, agent); !ok {
		return configRestored, nil
	} else if same {
		return configKept, nil
	}
	merged, ok := mergePytestConfig(p, start, agent)
	if !ok {
		return configRestored, nil
	}
	if err := gs.WriteFile(p, []byte(merged)); err != nil {
		return 0, err
	}
	return configRewritten, nil
}

func isTOML(p string) bool { return strings.HasSuffix(p, ".toml") }

// samePytestConfig reports whether two versions of the file configure pytest alike;
// ok is false when that cannot be told (a TOML file that does not parse).
func samePytestConfig(p, a, b string) (same, ok bool) {
	if !isTOML(p) {
		return iniPytest(a).pytest == iniPytest(b).pytest, true
	}
	ta, err1 := decodeTOML(a)
	tb, err2 := decodeTOML(b)
	if err1 != nil || err2 != nil {
		return false, false
	}
	return reflect.DeepEqual(tomlPytest(ta), tomlPytest(tb)), true
}

// mergePytestConfig is agent with its pytest sections replaced by start's; ok is
// false when the result cannot be shown to keep the rest of agent and start's pytest
// configuration exactly.
func mergePytestConfig(p, start, agent string) (string, bool) {
	if !isTOML(p) {
		s, a := iniPytest(start), iniPytest(agent)
		merged := a.rest
		if merged != "" && s.pytest != "" && !endsWithBreak(merged) {
			merged += "\n"
		}
		merged += s.pytest
		m := iniPytest(merged)
		return merged, m.pytest == s.pytest && m.rest == strings.TrimSuffix(merged, s.pytest)
	}
	s, a := tomlTables(start), tomlTables(agent)
	merged := a.rest
	if merged != "" && s.pytest != "" && !endsWithBreak(merged) {
		merged += "\n"
	}
	merged += s.pytest
	ts, err1 := decodeTOML(start)
	ta, err2 := decodeTOML(agent)
	tm, err3 := decodeTOML(merged)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", false
	}
	if !reflect.DeepEqual(tomlPytest(tm), tomlPytest(ts)) {
		return "", false
	}
	return merged, reflect.DeepEqual(withoutPytest(tm), withoutPytest(ta))
}

// splitText is a configuration file cut into pytest's sections and the rest, each
// in file order.
type splitText struct{ pytest, rest string }

// lines cuts s after each line break Python's str.splitlines knows (a superset of
// what any Python configuration reader splits at), keeping the breaks.
func lines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			out = append(out, s[start:i+n])
			start = i + n
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				n = 2
			}
			out = append(out, s[start:i+n])
			start = i + n
		}
		i += n
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func endsWithBreak(s string) bool {
	l := lines(s)
	if len(l) == 0 {
		return true
	}
	last := l[len(l)-1]
	r, _ := utf8.DecodeLastRuneInString(last)
	return r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == '\u0085' || r == '\u2028' || r == '\u2029' ||
		r == '\x1c' || r == '\x1d' || r == '\x1e'
}

// isHeader reports a line any INI or TOML reader could take for a section header:
// its first character that is not white space (or a byte-order mark) is "[".
func isHeader(line string) bool {
	t := strings.TrimLeftFunc(line, func(r rune) bool {
		return unicode.IsSpace(r) || r == '\ufeff' || r >= '\x1c' && r <= '\x1f' // Python's isspace
	})
	return strings.HasPrefix(t, "[")
}

// iniPytest cuts an INI file (setup.cfg) into the sections whose header names pytest
// (any header line containing "pytest" in any case: [tool:pytest], [pytest]) and the
// rest. Every line that could be a header to any reader is taken as one, so pytest
// never reads a section this does not count as its own.
func iniPytest(s string) splitText {
	var out splitText
	in := false
	for _, l := range lines(s) {
		if isHeader(l) {
			in = strings.Contains(strings.ToLower(l), "pytest")
		}
		if in {
			out.pytest += l
		} else {
			out.rest += l
		}
	}
	return out
}

// tomlTables cuts a TOML file into the tables under tool.pytest and the rest, line by
// line at header lines; mergePytestConfig checks the cut by parsing.
func tomlTables(s string) splitText {
	var out splitText
	in := false
	for _, l := range lines(s) {
		if isHeader(l) {
			in = headerUnderPytest(l)
		}
		if in {
			out.pytest += l
		} else {
			out.rest += l
		}
	}
	return out
}

// headerUnderPytest reports a TOML table header for tool.pytest or a table under it.
func headerUnderPytest(line string) bool {
	m, err := decodeTOML(strings.TrimRight(line, "\r\n") + "\n")
	if err != nil {
		return strings.Contains(strings.ToLower(line), "pytest")
	}
	return tomlPytest(m) != nil
}

func decodeTOML(s string) (map[string]any, error) {
	m := map[string]any{}
	_, err := toml.Decode(s, &m)
	return m, err
}

// tomlPytest is the tool.pytest value of a decoded file (nil if none).
func tomlPytest(m map[string]any) any {
	tool, ok := m["tool"].(map[string]any)
	if !ok {
		return nil
	}
	return tool["pytest"]
}

// withoutPytest is m without tool.pytest (and without an empty tool table).
func withoutPytest(m map[string]any) map[string]any {
	tool, ok := m["tool"].(map[string]any)
	if !ok {
		return m
	}
	delete(tool, "pytest")
	if len(tool) == 0 {
		delete(m, "tool")
	}
	return m
}
