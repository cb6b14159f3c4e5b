package reward

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// Exported for the tests of package reward_test.
var (
	// CheckReply checks a reply of the solution process as the relay does, and its id.
	CheckReply = func(line []byte, id int64) error {
		m := newMsgReader(bytes.NewReader(line)).reply()
		if m.err == nil && m.id != id {
			return fmt.Errorf("id %d, want %d", m.id, id)
		}
		return m.err
	}
	ParseRequest = func(line []byte) error {
		return newMsgReader(bytes.NewReader(line)).request().err
	}
	CodecPy = harnessLimits + codecPy
	// StreamSameOutput compares got, written in pieces of the given size, as a case's
	// streamed output is.
	StreamSameOutput = func(got, want string, piece int) bool {
		m := outputMatcher{want: normalize(want)}
		for len(got) > 0 {
			n := min(piece, len(got))
			m.write([]byte(got[:n]))
			got = got[n:]
		}
		return m.same()
	}
)

// FilterDiff is filterDiff without a deadline, for the tests of the diff rules.
func FilterDiff(diff string, testFiles []string) (kept string, discarded []string, testEdits int) {
	kept, discarded, testEdits, _ = filterDiff(context.Background(), diff, testFiles)
	return kept, discarded, testEdits
}

// FilterDiffCtx is filterDiff.
var FilterDiffCtx = filterDiff

// SamePytestConfig and MergePytestConfig are the pytest-section rules of setup.cfg
// and pyproject.toml.
var (
	SamePytestConfig  = samePytestConfig
	MergePytestConfig = mergePytestConfig
)

// SectionPaths lists the paths each section of a diff names, as filterDiff reads them.
func SectionPaths(diff string) [][]string {
	sections, _ := splitDiff(context.Background(), diff)
	out := make([][]string, len(sections))
	for i, s := range sections {
		out[i] = s.paths
	}
	return out
}

// PathKept reports whether the rules keep a change to path p.
func PathKept(p string, testFiles []string) bool { return pathRule(p, testFiles) == ruleKeep }

// The compiled harnesses (harnesscode.go).
var (
	// CompilePy is the program that compiles the harnesses.
	CompilePy = compilePy
	// TestsProgram and SolutionProgram are the two sides' harnesses.
	TestsProgram, SolutionProgram = testsProgram, solutionProgram
	// ParseCompiled reads what CompilePy wrote: the magic number and the two
	// compiled harnesses.
	ParseCompiled = func(b []byte) (magic []byte, tests, solution []byte, err error) {
		c, err := parseCompiled(b)
		if err != nil {
			return nil, nil, nil, err
		}
		return c.magic[:], c.tests, c.solution, nil
	}
)

// CompileHarnesses compiles the two given sources with the interpreter python in st,
// as the verifier compiles its harnesses.
func CompileHarnesses(ctx context.Context, st rollout.Starter, python, tests, solution string) (magic, testsCode, solutionCode []byte, err error) {
	c, err := compileHarness(ctx, st, python, tests, solution)
	if err != nil {
		return nil, nil, nil, err
	}
	return c.magic[:], c.tests, c.solution, nil
}

// HarnessCache is what the verifier keeps for the interpreter python: the magic
// number and the compiled harnesses (nil when none), and whether a compilation
// failed less than a retry period ago.
func HarnessCache(python string) (magic, tests, solution []byte, failed bool) {
	harnessCache.mu.Lock()
	defer harnessCache.mu.Unlock()
	e := harnessCache.entries[python]
	if e == nil {
		return nil, nil, nil, false
	}
	failed = !e.failedAt.IsZero() && time.Since(e.failedAt) < compileRetry
	if e.code == nil {
		return nil, nil, nil, failed
	}
	return e.code.magic[:], e.code.tests, e.code.solution, failed
}

// SetHarnessCache replaces what the verifier keeps for python (magic nil: nothing).
func SetHarnessCache(python string, magic, tests, solution []byte) {
	harnessCache.mu.Lock()
	defer harnessCache.mu.Unlock()
	if harnessCache.entries == nil {
		harnessCache.entries = map[string]*harnessEntry{}
	}
	e := &harnessEntry{}
	if magic != nil {
		e.code = &compiledHarness{tests: tests, solution: solution}
		copy(e.code.magic[:], magic)
	}
	harnessCache.entries[python] = e
}
