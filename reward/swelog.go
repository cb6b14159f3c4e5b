package reward

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestStatus is a test's outcome as a test log states it.
type TestStatus string

// Test statuses, as the SWE-bench harness names them.
const (
	StatusPassed  TestStatus = "PASSED"
	StatusFailed  TestStatus = "FAILED"
	StatusError   TestStatus = "ERROR"
	StatusSkipped TestStatus = "SKIPPED"
	StatusXFail   TestStatus = "XFAIL"
)

// rank orders statuses from best to worst; a test the log names twice keeps its worst
// (a planted line "PASSED id" does not cover pytest's own "FAILED id").
func (s TestStatus) rank() int {
	switch s {
	case StatusPassed, StatusXFail:
		return 1
	case StatusSkipped:
		return 2
	default:
		return 3
	}
}

// failed reports a FAILED or ERROR status.
func (s TestStatus) failed() bool { return s == StatusFailed || s == StatusError }

// statusWord is the status a word of a log names, when it is exactly one of the
// five.
func statusWord(w string) (TestStatus, bool) {
	switch s := TestStatus(w); s {
	case StatusPassed, StatusFailed, StatusError, StatusSkipped, StatusXFail:
		return s, true
	}
	return "", false
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// ParseTestLog reads the per-test statuses from a test log with the named parser.
//
// The parsers are those of the SWE-bench harness (swebench/harness/log_parsers), by
// their names there, with or without the "parse_log_" prefix: "parse_log_pytest"
// and its per-repository aliases (astroid, flask, marshmallow, pvlib, pyvista,
// sqlfluff, xarray), "parse_log_pytest_options" (pydicom, requests, pylint),
// "parse_log_pytest_v2" (astropy, scikit, sphinx), "parse_log_matplotlib",
// "parse_log_seaborn", "parse_log_django", "parse_log_sympy", "parse_log_gotest" and
// "parse_log_cargo"; [tasks.ParserPytest] and the other names [tasks.CanonicalParser]
// knows read as the parser of that name. Each derives a test's name from a line as
// SWE-bench's does, because the FAIL_TO_PASS and PASS_TO_PASS lists of a dataset
// hold the names its parser produced, and grading compares names exactly. So
// "parse_log_pytest" names a test by the second white-space-separated word of a line
// that starts with a status word: "PASSED t.py::test_f[a b]" names "t.py::test_f[a",
// as the datasets store it, and "t.py::test_f[ab]" is another name.
//
// Where this differs from SWE-bench: a test named more than once keeps its worst
// status (failed or error, then skipped, then passed), where SWE-bench keeps the
// last line's, so a line the tests' code prints cannot cover the runner's own; tests
// whose names SWE-bench's parser cuts to the same string (parametrized tests cut at
// a space) share that name and its worst status; a line whose status word is not
// exactly one of [StatusPassed], [StatusFailed], [StatusError], [StatusSkipped] and
// [StatusXFail] names no test; ANSI colour codes are removed first, for every
// parser; and "parse_log_pytest_v2", whose names SWE-bench v4.1 cut at the first
// space and v5 keeps whole, gives each test both names (a verbose line's status is
// its last word). An unknown parser is an error.
func ParseTestLog(parser, log string) (map[string]TestStatus, error) {
	read := logReader(parser)
	if read == nil {
		return nil, fmt.Errorf("reward: unknown log parser %q", parser)
	}
	m := statusMap{}
	read(ansi.ReplaceAllString(log, ""), m)
	return m, nil
}

// logReader is the reader of the named parser; nil when there is none.
func logReader(parser string) func(string, statusMap) {
	switch strings.TrimPrefix(strings.ToLower(parser), "parse_log_") {
	case "pytest", "astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff", "xarray":
		return parsePytest
	case "pytest_options", "pydicom", "requests", "pylint":
		return parsePytestOptions
	case "pytest_v2", "astropy", "scikit", "sklearn", "sphinx":
		return parsePytestV2
	case "matplotlib":
		return parseMatplotlib
	case "seaborn":
		return parseSeaborn
	}
	switch tasks.CanonicalParser(parser) {
	case tasks.ParserPytest:
		return parsePytest
	case tasks.ParserDjango:
		return parseDjango
	case tasks.ParserSympy:
		return parseSympy
	case tasks.ParserGoTest:
		return parseGoTest
	case tasks.ParserCargo:
		return parseCargo
	}
	return nil
}

// statusMap holds each test's worst status.
type statusMap map[string]TestStatus

func (m statusMap) set(id string, s TestStatus) {
	if id == "" {
		return
	}
	if old, ok := m[id]; ok && old.rank() >= s.rank() {
		return
	}
	m[id] = s
}

// isSpace reports what Python's str.isspace does: Go's white space and the
// separators U+001C to U+001F. The harness splits words with str.split().
func isSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// words splits s at runs of white space, as Python's str.split() does.
func words(s string) []string { return strings.FieldsFunc(s, isSpace) }

// strip removes white space at both ends, as Python's str.strip() does.
func strip(s string) string { return strings.TrimFunc(s, isSpace) }

// spaces are the characters of isSpace, for a class of a regular expression: space
// is Python's \s, nonSpace its \S.
const (
	spaces   = `\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`
	space    = `[` + spaces + `]`
	nonSpace = `[^` + spaces + `]`
)

// startsWithStatus and endsWithStatus report a line beginning or ending with one of
// the five status words (as text: "PASSEDX" begins with one).
func startsWithStatus(line string) bool {
	for _, s := range []TestStatus{StatusFailed, StatusPassed, StatusSkipped, StatusError, StatusXFail} {
		if strings.HasPrefix(line, string(s)) {
			return true
		}
	}
	return false
}

func endsWithStatus(line string) bool {
	for _, s := range []TestStatus{StatusFailed, StatusPassed, StatusSkipped, StatusError, StatusXFail} {
		if strings.HasSuffix(line, string(s)) {
			return true
		}
	}
	return false
}

// skipCount reports pytest's "SKIPPED [N] path:line: reason" summary line, whose
// second word is a count, not a test.
func skipCount(status, second string) bool {
	if status != string(StatusSkipped) || len(second) < 3 || second[0] != '[' || second[len(second)-1] != ']' {
		return false
	}
	for _, c := range second[1 : len(second)-1] {
		if !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// summaryLine reads a line of pytest's "-rA" short summary as parse_log_pytest
// does: a line that starts with a status word, in which a FAILED line has every
// " - " made a space, split into words; the test is the second word. ok is false
// for any other line.
func summaryLine(line string) (s TestStatus, name string, ok bool) {
	if !startsWithStatus(line) {
		return "", "", false
	}
	if strings.HasPrefix(line, string(StatusFailed)) {
		line = strings.ReplaceAll(line, " - ", " ")
	}
	w := words(line)
	if len(w) < 2 || skipCount(w[0], w[1]) {
		return "", "", false
	}
	s, ok = statusWord(w[0])
	return s, w[1], ok
}

// parsePytest is parse_log_pytest: "PASSED id", "FAILED id - message", the id cut
// at its first white space.
func parsePytest(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if s, name, ok := summaryLine(line); ok {
			m.set(name, s)
		}
	}
}

// parseMatplotlib is parse_log_matplotlib: parse_log_pytest after MouseButton.LEFT
// and MouseButton.RIGHT are written 1 and 3.
func parseMatplotlib(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		line = strings.ReplaceAll(strings.ReplaceAll(line, "MouseButton.LEFT", "1"), "MouseButton.RIGHT", "3")
		if s, name, ok := summaryLine(line); ok {
			m.set(name, s)
		}
	}
}

// parsePytestOptions is parse_log_pytest_options: parse_log_pytest, and a name with
// a parameter keeps what lies between its first "[" and its last "]" (text after
// that is dropped), an absolute path there shortened to its last element
// ("test_x[/tmp/a/b]" → "test_x[/b]"; not when it starts with "//" or holds "*").
func parsePytestOptions(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		s, name, ok := summaryLine(line)
		if !ok {
			continue
		}
		i, j := strings.IndexByte(name, '['), strings.LastIndexByte(name, ']')
		if i >= 0 && j > i {
			opt := name[i+1 : j]
			if strings.HasPrefix(opt, "/") && !strings.HasPrefix(opt, "//") && !strings.Contains(opt, "*") {
				opt = "/" + opt[strings.LastIndexByte(opt, '/')+1:]
			}
			name = name[:i] + "[" + opt + "]"
		}
		m.set(name, s)
	}
}

// v2Colour is what parse_log_pytest_v2 removes as colour codes: "[32m", with or
// without the escape before it.
var v2Colour = regexp.MustCompile(`\[\p{Nd}+m`)

// parsePytestV2 is parse_log_pytest_v2: colour codes and control characters
// (U+0001 to U+001F) removed, then lines that start with a status word ("PASSED
// id", "FAILED id - message") and lines that end with one ("id PASSED", pytest's
// verbose lines in the classic console style). SWE-bench v4.1 named the test by the
// id's first word (the datasets' names); v5 keeps the whole id (a FAILED line cut at
// its first " - "). Both names are kept.
func parsePytestV2(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		line = strings.Map(func(r rune) rune {
			if r >= 1 && r < 0x20 {
				return -1
			}
			return r
		}, v2Colour.ReplaceAllString(line, ""))
		switch {
		case startsWithStatus(line):
			if s, name, ok := summaryLine(line); ok {
				m.set(name, s)
			}
			if strings.HasPrefix(line, string(StatusFailed)) {
				line, _, _ = strings.Cut(line, " - ")
			}
			if w := words(line); len(w) >= 2 && !skipCount(w[0], w[1]) {
				if s, ok := statusWord(w[0]); ok {
					m.set(strings.Join(w[1:], " "), s)
				}
			}
		case endsWithStatus(line):
			if w := words(line); len(w) >= 2 {
				if s, ok := statusWord(w[len(w)-1]); ok {
					m.set(w[0], s)
					m.set(strings.Join(w[:len(w)-1], " "), s)
				}
			}
		}
	}
}

// parseSeaborn is parse_log_seaborn: "FAILED id" and "PASSED id" name the second
// word, "id PASSED …" the first; other statuses are not read.
func parseSeaborn(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		w := words(line)
		switch {
		case len(w) < 2:
		case strings.HasPrefix(line, string(StatusFailed)):
			m.set(w[1], StatusFailed)
		case strings.Contains(line, " PASSED "):
			if w[1] == string(StatusPassed) {
				m.set(w[0], StatusPassed)
			}
		case strings.HasPrefix(line, string(StatusPassed)):
			m.set(w[1], StatusPassed)
		}
	}
}

// djangoInterleaved are the three results parse_log_django repairs where a print
// split "desc ... " from its "ok", each with a text its match holds.
var djangoInterleaved = []struct {
	holds string
	re    *regexp.Regexp
}{
	{"Testing against Django installed in", regexp.MustCompile(`(?m)^(.*?)` + space + `\.\.\.` + space +
		`Testing against Django installed in ((?s:.*?)) silenced\)\.\nok$`)},
	{"Internal Server Error: /", regexp.MustCompile(`(?m)^(.*?)` + space + `\.\.\.` + space + `Internal Server Error: /(.*)/\nok$`)},
	{"System check identified no issues (0 silenced)\nok", regexp.MustCompile(`(?m)^(.*?)` + space + `\.\.\.` + space +
		`System check identified no issues \(0 silenced\)\nok$`)},
}

// parseDjango is parse_log_django, reading runtests.py at verbosity 2 line by line
// (white space stripped): "desc ... ok" (or "OK") passes desc, "desc ... skipped
// 'r'" skips it, "desc ... FAIL" and "desc ... ERROR" fail it, "FAIL: word" and
// "ERROR: word" fail the header's first word, and a line starting with "ok" passes
// the desc of the last line that held " ... " (a test's output came between). desc
// is the text before the first " ... " (before the last for "ok"), so a test with a
// docstring is named by the docstring's first line, as in the datasets.
func parseDjango(log string, m statusMap) {
	prev, havePrev := "", false
	for line := range strings.SplitSeq(log, "\n") {
		line = strip(line)
		if strings.Contains(line, "--version is equivalent to version") {
			m.set("--version is equivalent to version", StatusPassed)
		}
		if desc, _, ok := strings.Cut(line, " ... "); ok {
			prev, havePrev = desc, true
		}
		for _, suffix := range []string{" ... ok", " ... OK", " ...  OK"} {
			if !strings.HasSuffix(line, suffix) {
				continue
			}
			// SWE-bench's repair for django__django-7188, where a migration's
			// output precedes the test's name on its line.
			if strings.HasPrefix(line, "Applying sites.0002_alter_domain_unique...test_no_migrations") {
				_, after, _ := strings.Cut(line, "...")
				line = strip(after)
			}
			if i := strings.LastIndex(line, suffix); i >= 0 {
				m.set(line[:i], StatusPassed)
			} else {
				m.set(line, StatusPassed)
			}
			break
		}
		if desc, _, ok := strings.Cut(line, " ... skipped"); ok {
			m.set(desc, StatusSkipped)
		}
		if strings.HasSuffix(line, " ... FAIL") {
			desc, _, _ := strings.Cut(line, " ... FAIL")
			m.set(desc, StatusFailed)
		}
		if strings.HasPrefix(line, "FAIL:") {
			if w := words(line); len(w) >= 2 {
				m.set(w[1], StatusFailed)
			}
		}
		if strings.HasSuffix(line, " ... ERROR") {
			desc, _, _ := strings.Cut(line, " ... ERROR")
			m.set(desc, StatusError)
		}
		if strings.HasPrefix(line, "ERROR:") {
			if w := words(line); len(w) >= 2 {
				m.set(w[1], StatusError)
			}
		}
		if strings.HasPrefix(line, "ok") && havePrev {
			m.set(prev, StatusPassed)
		}
	}
	for _, d := range djangoInterleaved {
		if !strings.Contains(log, d.holds) {
			continue
		}
		for _, sub := range d.re.FindAllStringSubmatch(log, -1) {
			m.set(sub[1], StatusPassed)
		}
	}
}

// sympyHeader is parse_log_sympy's failure header, "____ path.py:test_x ____"; it
// names "path.py:test_x".
var sympyHeader = regexp.MustCompile(`(_*) (.*)\.py:(.*) (_*)`)

// parseSympy is parse_log_sympy, reading bin/test --verbose: a line starting with
// "test_" and ending in " ok", " F" or " E" names its first word; a failure header
// names "path.py:test_x" as failed. (SWE-bench matches the header over the whole
// log; no match spans lines, so matching line by line finds the same.)
func parseSympy(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, ".py:") {
			for _, sub := range sympyHeader.FindAllStringSubmatch(line, -1) {
				m.set(sub[2]+".py:"+sub[3], StatusFailed)
			}
		}
		line = strip(line)
		if !strings.HasPrefix(line, "test_") {
			continue
		}
		name := words(line)[0]
		switch {
		case strings.HasSuffix(line, " E"):
			m.set(name, StatusError)
		case strings.HasSuffix(line, " F"):
			m.set(name, StatusFailed)
		case strings.HasSuffix(line, " ok"):
			m.set(name, StatusPassed)
		}
	}
}

var goTestLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$`)

// parseGoTest is parse_log_gotest, reading "go test -v": "--- PASS: TestX (0.01s)"
// names all between "PASS: " and the last " (".
func parseGoTest(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if sub := goTestLine.FindStringSubmatch(strip(line)); sub != nil {
			m.set(sub[2], map[string]TestStatus{"PASS": StatusPassed, "FAIL": StatusFailed, "SKIP": StatusSkipped}[sub[1]])
		}
	}
}

var cargoLine = regexp.MustCompile(`^test` + space + `+(` + nonSpace + `+)` + space + `+\.\.\.` + space + `+(ok|FAILED)$`)

// parseCargo is parse_log_cargo, reading "cargo test": "test mod::name ... ok" or
// "... FAILED" (an ignored test is not read).
func parseCargo(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if sub := cargoLine.FindStringSubmatch(strip(line)); sub != nil {
			m.set(sub[1], map[string]TestStatus{"ok": StatusPassed, "FAILED": StatusFailed}[sub[2]])
		}
	}
}
