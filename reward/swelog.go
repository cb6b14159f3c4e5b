package reward

import (
	"fmt"
	"regexp"
	"strings"

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

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// ParseTestLog reads the per-test statuses from a test log with the named parser
// ([tasks.ParserPytest], [tasks.ParserDjango], [tasks.ParserSympy],
// [tasks.ParserGoTest], [tasks.ParserCargo], or a SWE-bench harness name that maps
// onto one, see [tasks.CanonicalParser]). ANSI colour codes are removed first. A test
// named more than once keeps its worst status (failed or error, then skipped, then
// passed). An unknown parser is an error.
func ParseTestLog(parser, log string) (map[string]TestStatus, error) {
	log = ansi.ReplaceAllString(strings.ReplaceAll(log, "\r\n", "\n"), "")
	m := statusMap{}
	switch tasks.CanonicalParser(parser) {
	case tasks.ParserPytest:
		parsePytest(log, m)
	case tasks.ParserDjango:
		parseDjango(log, m)
	case tasks.ParserSympy:
		parseSympy(log, m)
	case tasks.ParserGoTest:
		parseGoTest(log, m)
	case tasks.ParserCargo:
		parseCargo(log, m)
	default:
		return nil, fmt.Errorf("reward: unknown log parser %q", parser)
	}
	return m, nil
}

type statusMap map[string]TestStatus

func (m statusMap) set(id string, s TestStatus) {
	id = strings.TrimSpace(id)
	if id == "" {
		return
	}
	if old, ok := m[id]; ok && old.rank() >= s.rank() {
		return
	}
	m[id] = s
}

var pytestStatuses = []TestStatus{StatusPassed, StatusFailed, StatusError, StatusSkipped, StatusXFail}

// pytestVerbose is a "-v" line: "<id> PASSED [ 50%]".
var pytestVerbose = regexp.MustCompile(`^(\S.*::\S.*?)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL)(?:\s+\(.*\))?(?:\s+\[\s*\d+%\])?$`)

// parsePytest reads the "-rA" short summary ("PASSED id", "FAILED id - message";
// "SKIPPED [1] file:line: reason" names no test and is left out) and "-v" lines.
func parsePytest(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		line = strings.TrimSpace(line)
		word, rest, _ := strings.Cut(line, " ")
		matched := false
		for _, s := range pytestStatuses {
			if word != string(s) {
				continue
			}
			matched = true
			if s == StatusSkipped && strings.HasPrefix(rest, "[") {
				break
			}
			if i := strings.Index(rest, " - "); i >= 0 {
				rest = rest[:i]
			}
			m.set(rest, s)
		}
		if matched {
			continue
		}
		if sub := pytestVerbose.FindStringSubmatch(line); sub != nil {
			m.set(sub[1], TestStatus(sub[2]))
		}
	}
}

var (
	djangoResult = regexp.MustCompile(`^(.*?) \.\.\. (ok|OK|FAIL|ERROR|skipped.*|expected failure|unexpected success)$`)
	djangoHeader = regexp.MustCompile(`^(FAIL|ERROR): (.*)$`)
)

// parseDjango reads runtests.py at verbosity 2: "desc ... ok", "... skipped 'r'",
// "... FAIL", "... ERROR", and "FAIL: desc" / "ERROR: desc" headers. A result on a
// line of its own is credited to the previous "desc ..." line (a docstring between).
func parseDjango(log string, m statusMap) {
	prev := ""
	for line := range strings.SplitSeq(log, "\n") {
		line = strings.TrimSpace(line)
		if sub := djangoHeader.FindStringSubmatch(line); sub != nil {
			m.set(sub[2], map[string]TestStatus{"FAIL": StatusFailed, "ERROR": StatusError}[sub[1]])
			continue
		}
		if strings.HasSuffix(line, " ...") {
			prev = strings.TrimSuffix(line, " ...")
			continue
		}
		sub := djangoResult.FindStringSubmatch(line)
		id, res := "", ""
		switch {
		case sub != nil:
			id, res = sub[1], sub[2]
			if !strings.Contains(id, "(") && prev != "" {
				id = prev // "docstring ... ok" after "test_x (mod.Cls)"
			}
		case prev != "" && (line == "ok" || line == "FAIL" || line == "ERROR" || strings.HasPrefix(line, "skipped")):
			id, res = prev, line
		default:
			if line != "" && !strings.Contains(line, "(") {
				continue
			}
			prev = line
			continue
		}
		prev = ""
		switch {
		case res == "ok" || res == "OK" || res == "unexpected success":
			m.set(id, StatusPassed)
		case res == "expected failure":
			m.set(id, StatusXFail)
		case strings.HasPrefix(res, "skipped"):
			m.set(id, StatusSkipped)
		case res == "FAIL":
			m.set(id, StatusFailed)
		default:
			m.set(id, StatusError)
		}
	}
}

var (
	sympyResult = regexp.MustCompile(`^(test_\w+) (ok|F|E|f|s|Skip)\b`)
	sympyHeader = regexp.MustCompile(`^_+ \S+\.py:(test_\w+) _+$`)
)

// parseSympy reads bin/test --verbose: "test_x ok", "test_x F", "test_x E", and
// "___ path.py:test_x ___" failure headers.
func parseSympy(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		line = strings.TrimSpace(line)
		if sub := sympyHeader.FindStringSubmatch(line); sub != nil {
			m.set(sub[1], StatusFailed)
			continue
		}
		if sub := sympyResult.FindStringSubmatch(line); sub != nil {
			switch sub[2] {
			case "ok":
				m.set(sub[1], StatusPassed)
			case "F":
				m.set(sub[1], StatusFailed)
			case "E":
				m.set(sub[1], StatusError)
			case "f":
				m.set(sub[1], StatusXFail)
			default:
				m.set(sub[1], StatusSkipped)
			}
		}
	}
}

var goTestLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// parseGoTest reads "go test -v": "--- PASS: TestX (0.01s)".
func parseGoTest(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if sub := goTestLine.FindStringSubmatch(line); sub != nil {
			m.set(sub[2], map[string]TestStatus{"PASS": StatusPassed, "FAIL": StatusFailed, "SKIP": StatusSkipped}[sub[1]])
		}
	}
}

var cargoLine = regexp.MustCompile(`^test (\S+) \.\.\. (ok|FAILED|ignored)`)

// parseCargo reads "cargo test": "test mod::name ... ok".
func parseCargo(log string, m statusMap) {
	for line := range strings.SplitSeq(log, "\n") {
		if sub := cargoLine.FindStringSubmatch(strings.TrimSpace(line)); sub != nil {
			m.set(sub[1], map[string]TestStatus{"ok": StatusPassed, "FAILED": StatusFailed, "ignored": StatusSkipped}[sub[2]])
		}
	}
}
