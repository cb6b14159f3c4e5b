package reward

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/internal/gitpath"
)

// filterCheckEvery is how many lines filterDiff reads between looks at its ctx.
const filterCheckEvery = 4096

// diffSection is one file's part of a git diff: diff[start:end], and every path its
// header lines name, decoded as git decodes them ("?" for a name that cannot be
// placed for certain).
type diffSection struct {
	start, end int
	paths      []string
}

// filterDiff drops the sections of diff that grading owns or that no fix needs (see
// [RepoResult.Discarded]) and returns the rest, the discarded paths and how many of
// them are test files. Its work is linear in the diff's size; it stops with ctx's
// error when ctx ends.
func filterDiff(ctx context.Context, diff string, testFiles []string) (kept string, discarded []string, testEdits int, err error) {
	sections, err := splitDiff(ctx, diff)
	if err != nil {
		return "", nil, 0, err
	}
	var b strings.Builder
	for _, s := range sections {
		test, drop := false, false
		for _, p := range s.paths {
			switch rule := pathRule(p, testFiles); rule {
			case ruleTest:
				test, drop = true, true
			case ruleKeep:
			default:
				drop = true
			}
		}
		if !drop {
			b.WriteString(diff[s.start:s.end])
			continue
		}
		if len(s.paths) > 0 {
			discarded = append(discarded, s.paths[len(s.paths)-1])
		}
		if test {
			testEdits++
		}
	}
	return b.String(), discarded, testEdits, nil
}

// splitDiff cuts a diff at its "diff --git" lines and reads the names of each
// section's header lines: the "diff --git" line's, and outside the hunks (whose
// lengths are taken from their "@@" lines, as git apply takes them) every "---",
// "+++", "rename from/to" and "copy from/to" line's. Text before the first header is
// a section of its own that names "?". One pass, no line copied.
func splitDiff(ctx context.Context, diff string) ([]diffSection, error) {
	var out []diffSection
	var cur *diffSection
	var oldLeft, newLeft int // lines left in the current hunk
	binary := false
	add := func(p string) {
		if !slices.Contains(cur.paths, p) {
			cur.paths = append(cur.paths, p)
		}
	}
	pos, n := 0, 0
	for pos < len(diff) {
		if n++; n%filterCheckEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		end := strings.IndexByte(diff[pos:], '\n')
		if end < 0 {
			end = len(diff)
		} else {
			end += pos + 1
		}
		line := strings.TrimSuffix(diff[pos:end], "\n")
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			if cur != nil {
				cur.end = pos
			}
			out = append(out, diffSection{start: pos})
			cur = &out[len(out)-1]
			oldLeft, newLeft, binary = 0, 0, false
			a, b, ok := gitpath.HeaderNames(rest)
			if !ok {
				add("?")
			} else {
				add(prefixed(a))
				add(prefixed(b))
			}
			pos = end
			continue
		}
		if cur == nil {
			out = append(out, diffSection{start: pos, paths: []string{"?"}})
			cur = &out[len(out)-1]
		}
		switch {
		case oldLeft > 0 || newLeft > 0:
			switch {
			case line == "" || line[0] == ' ':
				oldLeft, newLeft = oldLeft-1, newLeft-1
			case line[0] == '-':
				oldLeft--
			case line[0] == '+':
				newLeft--
			case line[0] == '\\':
			default: // a broken hunk: what follows is header text again
				oldLeft, newLeft = 0, 0
				headerLine(line, add)
			}
		case binary:
			if line == "" {
				binary = false
			}
		case strings.HasPrefix(line, "@@ "):
			oldLeft, newLeft = hunkLengths(line)
		case line == "GIT binary patch":
			binary = true
		default:
			headerLine(line, add)
		}
		pos = end
	}
	if cur != nil {
		cur.end = len(diff)
	}
	return out, nil
}

// headerLine adds the name a header line outside a hunk gives, if any.
func headerLine(line string, add func(string)) {
	var name string
	var ok, pre bool
	switch {
	case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
		name, ok = gitpath.FileName(line[4:])
		pre = true
		if ok && name == "" {
			return // /dev/null
		}
	case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
		_, x, _ := strings.Cut(line, " from ")
		name, ok = unquoted(x)
	case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
		_, x, _ := strings.Cut(line, " to ")
		name, ok = unquoted(x)
	default:
		return
	}
	switch {
	case !ok:
		add("?")
	case pre:
		add(prefixed(name))
	default:
		add(placed(gitpath.Clean(name)))
	}
}

func unquoted(x string) (string, bool) {
	s, err := gitpath.Unquote(strings.TrimRight(x, "\r"))
	return s, err == nil
}

// prefixed is the path git apply -p1 writes for a prefixed name.
func prefixed(name string) string { return placed(gitpath.StripPrefix(name)) }

func placed(p string) string {
	if p == "" {
		return "?"
	}
	return p
}

// hunkLengths reads "@@ -a,b +c,d @@": the old and new line counts (1 when a count
// is left out; 0 for a line that does not parse, which ends the hunk at once).
func hunkLengths(line string) (oldN, newN int) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0
	}
	count := func(s string) int {
		_, c, found := strings.Cut(s[1:], ",")
		if !found {
			return 1
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return count(f[1]), count(f[2])
}

// pathVerdict is what grading does with a path of the agent's diff.
type pathVerdict int

const (
	ruleKeep pathVerdict = iota
	// ruleTest: a test file, or a file that configures the test run or Python's
	// start-up; counted in TestFileEdits.
	ruleTest
	// ruleOutside: outside the repository, in .git, or a name that cannot be placed.
	ruleOutside
	// ruleArtefact: build output and packaging metadata.
	ruleArtefact
)

// pathRule is the verdict for one cleaned path (see [RepoResult.Discarded]).
func pathRule(p string, testFiles []string) pathVerdict {
	switch {
	case !pathInside(p):
		return ruleOutside
	case slices.Contains(testFiles, p), isTestPath(p), holdsTestFile(p, testFiles):
		return ruleTest
	case isArtefact(p):
		return ruleArtefact
	}
	return ruleKeep
}

// holdsTestFile reports a path at which a test file's directory would be: a file or
// link there (a file named as a directory the test patch creates, or a link to
// elsewhere) would make the tests' restore fail or land elsewhere.
func holdsTestFile(p string, testFiles []string) bool {
	for _, t := range testFiles {
		if len(t) > len(p) && t[len(p)] == '/' && strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// testDirs are directory names whose files are tests or their helpers.
var testDirs = []string{"tests", "test", "testing"}

// isTestPath reports a path pytest or unittest would collect or load as a test (in or
// named as a test directory, named test_*.py or *_test.py, or conftest.py anywhere),
// a repository's own test runner (bin/test, runtests.py anywhere),
// one that configures the test run (pytest.ini, .pytest.ini, pytest.toml,
// .pytest.toml, tox.ini), Python's start-up (sitecustomize, usercustomize, in any
// importable form) or git's view of files (.gitattributes).
func isTestPath(p string) bool {
	base := path.Base(p)
	if base == "conftest.py" || strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py") ||
		strings.HasSuffix(base, "_test.py") {
		return true
	}
	if p == "bin/test" || base == "runtests.py" {
		// A repository's own test runner (sympy's bin/test and
		// sympy/utilities/runtests.py, django's tests/runtests.py).
		return true
	}
	switch base {
	case "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", ".gitattributes":
		// The test runner's own configuration (addopts = -p plugin), and the
		// attributes git applies when it restores and patches the tests.
		return true
	}
	if mod, ok := moduleName(base); ok && (mod == "sitecustomize" || mod == "usercustomize") {
		return true
	}
	for dir := range strings.SplitSeq(p, "/") {
		if slices.Contains(testDirs, strings.ToLower(dir)) || dir == "sitecustomize" || dir == "usercustomize" {
			return true
		}
	}
	return false
}

// importSuffixes are the endings of the files Python imports as modules.
var importSuffixes = []string{".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd"}

// moduleName is the module a file of that name is imported as: its name up to the
// first dot, when the name ends in an import suffix.
func moduleName(base string) (string, bool) {
	if !slices.ContainsFunc(importSuffixes, func(s string) bool { return strings.HasSuffix(base, s) }) {
		return "", false
	}
	mod, _, _ := strings.Cut(base, ".")
	return mod, mod != ""
}

// pathInside reports a relative path inside the repository and outside .git.
func pathInside(p string) bool {
	if p == "?" || p == "" || path.IsAbs(p) {
		return false
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

// isArtefact reports build output and packaging metadata a fix does not need: a
// distribution's metadata at a path on sys.path is how pytest finds plugins (entry
// points), so none of it is taken.
func isArtefact(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		// Python's importers match these suffixes case-insensitively
		// (importlib.metadata and pkg_resources lower-case directory names).
		lower := strings.ToLower(c)
		switch {
		case c == "__pycache__", c == ".pytest_cache",
			strings.HasSuffix(lower, ".egg-info"), strings.HasSuffix(lower, ".dist-info"),
			strings.HasSuffix(lower, ".egg"), strings.HasSuffix(lower, ".egg-link"):
			return true
		}
	}
	lower := strings.ToLower(path.Base(p))
	return strings.HasSuffix(lower, ".pyc") || strings.HasSuffix(lower, ".pyo")
}
