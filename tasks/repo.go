package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/internal/gitpath"
)

// DefaultWorkDir is the working directory of a repository task whose source names none,
// where SWE-bench-style images keep the repository.
const DefaultWorkDir = "/testbed"

// Log parser names for [Repo.LogParser]; reward.ParseTestLog implements each.
const (
	// ParserPytest reads pytest's "-rA" short summary ("PASSED id", "FAILED id - msg")
	// and "-v" lines ("id PASSED"), with ANSI colour codes removed.
	ParserPytest = "pytest"
	// ParserDjango reads Django's runtests.py at verbosity 2 ("desc ... ok").
	ParserDjango = "django"
	// ParserSympy reads sympy's bin/test ("test_x ok", "test_x F").
	ParserSympy = "sympy"
	// ParserGoTest reads "go test -v" ("--- PASS: TestX (0.01s)").
	ParserGoTest = "gotest"
	// ParserCargo reads "cargo test" ("test mod::name ... ok").
	ParserCargo = "cargo"
)

// ErrUnknownRepo is wrapped by a loader's error for a repository task that names no
// test command or log parser and whose repository is not in the specification table
// ([RepoSpecs]).
var ErrUnknownRepo = errors.New("tasks: repository without a test specification")

// Repo is what makes a [Task] a repository task: a repository at a commit inside a
// container image, an issue to resolve ([Task.Statement]) and hidden tests that decide.
// The test material (TestPatch, HiddenFiles' contents) and GoldPatch are never shown to
// the agent and never put in its sandbox; the reward package applies them in a fresh
// sandbox of the same image after the agent stops.
type Repo struct {
	// Image is the image reference ("registry/repo:tag", "…@sha256:…",
	// "oci-layout:/dir", "docker-archive:/file.tar").
	Image string
	// WorkDir is the repository's directory in the image; "" means [DefaultWorkDir].
	WorkDir string
	// Name is the repository, "owner/repo"; it selects the specification in [RepoSpecs].
	Name string
	// Version is the dataset's release line of the repository ("3.0"), if any.
	Version string
	// BaseCommit is the commit the dataset's diffs are against. The agent's change is
	// taken against the commit the image's work tree is at when a sandbox starts (an
	// image may hold one more commit than BaseCommit, as SWE-bench's do), and test files
	// are restored from that commit before the test patch is applied.
	BaseCommit string
	// Setup is a patch applied and committed before the agent starts, in the agent's
	// sandbox and in the grading sandbox alike (SWE-smith's bug patch); "" for none.
	Setup string
	// HiddenFiles are files deleted (and the deletion committed) before the agent
	// starts, and restored from the image's commit for grading (SWE-smith removes its
	// FAIL_TO_PASS tests this way). They count as test files: the agent's changes to
	// them are discarded.
	HiddenFiles []string
	// TestPatch is the diff that adds the hidden tests, applied for grading only.
	TestPatch string
	// GoldPatch is a correct fix, for validating the task only; never shown. When
	// GoldReversed is set, the fix is GoldPatch applied in reverse (SWE-smith's patch
	// introduces the bug).
	GoldPatch    string
	GoldReversed bool
	// TestCommand is the shell command that runs the tests, from WorkDir, with the
	// test files already appended when the source asks for that.
	TestCommand string
	// LogParser names the parser of the test log (ParserPytest, …).
	LogParser string
	// FailToPass are the tests that must go from failing to passing; never empty.
	FailToPass []string
	// PassToPass are the tests that must keep passing.
	PassToPass []string
	// Network lets the tests and the agent reach the network; off by default.
	Network bool
	// TestTimeout bounds the test command; 0 means the grader's default.
	TestTimeout time.Duration
}

// Dir is the repository's directory: WorkDir, else [DefaultWorkDir].
func (r *Repo) Dir() string {
	if r.WorkDir == "" {
		return DefaultWorkDir
	}
	return r.WorkDir
}

// TestFiles are the files the grading owns: those the test patch touches (created,
// modified or deleted) and HiddenFiles, sorted, each once. The agent's changes to them
// are discarded.
func (r *Repo) TestFiles() []string {
	files := slices.Clone(r.HiddenFiles)
	files = append(files, PatchFiles(r.TestPatch)...)
	slices.Sort(files)
	return slices.Compact(files)
}

// PatchFiles lists the paths a unified diff touches, in order, each once: both sides of
// every "diff --git a/X b/Y" header, and of "--- a/X" / "+++ b/Y" lines for diffs
// without git headers ("/dev/null" left out). Names are read as git reads them:
// C-quoted names are decoded, escapes and all.
func PatchFiles(patch string) []string {
	var out []string
	add := func(p string) {
		if len(p) > 2 && (p[:2] == "a/" || p[:2] == "b/") {
			p = p[2:]
		}
		p = gitpath.Clean(p)
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for line := range strings.SplitSeq(patch, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			rest := strings.TrimPrefix(line, "diff --git ")
			a, b, ok := gitpath.HeaderNames(rest)
			if !ok {
				a, b, ok = splitGitHeader(rest)
			}
			if ok {
				add(a)
				add(b)
			}
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
			if name, ok := gitpath.FileName(strings.TrimSpace(line[4:])); ok {
				add(name)
			}
		}
	}
	return out
}

// splitGitHeader splits an unquoted "a/X b/Y" of a diff --git header whose halves
// name different paths (a rename): at the first " b/".
func splitGitHeader(s string) (a, b string, ok bool) {
	i := strings.Index(s, " b/")
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// TestList is a list of test ids that decodes from a JSON array of strings or from a
// JSON string holding such an array: SWE-bench stores FAIL_TO_PASS and PASS_TO_PASS
// the second way, SWE-Gym, SWE-smith and SWE-rebench V2 the first.
type TestList []string

// UnmarshalJSON implements [json.Unmarshaler].
func (l *TestList) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*l = nil
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		return l.parseString(s)
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("want a list of test ids (a JSON array of strings, or a string holding one), have %.40s", data)
	}
	*l = list
	return nil
}

func (l *TestList) parseString(s string) error {
	if strings.TrimSpace(s) == "" {
		*l = nil
		return nil
	}
	var list []string
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return fmt.Errorf("a string that does not hold a JSON array of test ids (%v)", err)
	}
	*l = list
	return nil
}

// RepoSpec is how a repository's tests are run and read.
type RepoSpec struct {
	// TestCommand runs the tests from the work dir; the test files are appended when
	// AppendTestFiles is set.
	TestCommand string
	// LogParser names the parser of the log.
	LogParser string
	// AppendTestFiles appends the test patch's test files (SWE-bench's "directives",
	// non-test extensions left out) to TestCommand; for Django as dotted modules.
	AppendTestFiles bool
}

// RepoSpecs is the specification table of the repositories SWE-bench and its relatives
// draw from, by "owner/repo" (the SWE-bench harness's per-repository test commands and
// parsers, v4.1.0, with pytest's cache plugin off). A fresh map on each call: callers
// may add to it and pass it as [SWEConfig.Specs].
func RepoSpecs() map[string]RepoSpec {
	pytest := RepoSpec{TestCommand: "pytest --no-header -rA --tb=no -p no:cacheprovider", LogParser: ParserPytest, AppendTestFiles: true}
	m := map[string]RepoSpec{
		"django/django": {TestCommand: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
			LogParser: ParserDjango, AppendTestFiles: true},
		"sympy/sympy": {TestCommand: "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
			LogParser: ParserSympy, AppendTestFiles: true},
		"sphinx-doc/sphinx": {TestCommand: "tox --current-env -epy39 -v --", LogParser: "parse_log_pytest_v2", AppendTestFiles: true},
		"astropy/astropy": {TestCommand: "pytest -rA -vv -o console_output_style=classic --tb=no",
			LogParser: "parse_log_pytest_v2", AppendTestFiles: true},
	}
	for _, r := range []string{"pallets/flask", "marshmallow-code/marshmallow", "pvlib/pvlib-python", "pyvista/pyvista",
		"sqlfluff/sqlfluff", "pydata/xarray", "pylint-dev/astroid", "pytest-dev/pytest", "psf/requests",
		"pydicom/pydicom", "pylint-dev/pylint", "scikit-learn/scikit-learn", "matplotlib/matplotlib",
		"mwaskom/seaborn", "getmoto/moto", "conan-io/conan", "iterative/dvc", "python/mypy", "pandas-dev/pandas",
		"dask/dask", "bokeh/bokeh", "modin-project/modin", "facebookresearch/hydra", "project-monai/monai",
		"pydantic/pydantic"} {
		m[r] = pytest
	}
	// The harness reads these repositories' logs with parsers of their own, whose test
	// names the datasets hold (see reward.ParseTestLog).
	for r, parser := range map[string]string{
		"scikit-learn/scikit-learn": "parse_log_pytest_v2",
		"psf/requests":              "parse_log_pytest_options", "pydicom/pydicom": "parse_log_pytest_options",
		"pylint-dev/pylint":     "parse_log_pytest_options",
		"matplotlib/matplotlib": "parse_log_matplotlib",
		"mwaskom/seaborn":       "parse_log_seaborn",
	} {
		spec := pytest
		spec.LogParser = parser
		m[r] = spec
	}
	return m
}

// nonTestExt are the extensions SWE-bench leaves out of the test files it appends.
var nonTestExt = []string{".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"}

// Command is the test command of spec for a task whose test patch is testPatch.
func (s RepoSpec) Command(repo, testPatch string) string {
	if !s.AppendTestFiles {
		return s.TestCommand
	}
	var files []string
	for _, f := range PatchFiles(testPatch) {
		if slices.ContainsFunc(nonTestExt, func(e string) bool { return strings.HasSuffix(f, e) }) {
			continue
		}
		if repo == "django/django" {
			f = strings.TrimSuffix(strings.TrimPrefix(f, "tests/"), ".py")
			f = strings.ReplaceAll(f, "/", ".")
		}
		files = append(files, shellQuote(f))
	}
	if len(files) == 0 {
		return s.TestCommand
	}
	return s.TestCommand + " " + strings.Join(files, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
