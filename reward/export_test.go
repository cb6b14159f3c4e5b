package reward

import (
	"bytes"
	"context"
	"fmt"
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
