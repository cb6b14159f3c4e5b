package rollout

import (
	"regexp"
	"regexp/syntax"

	"github.com/agentic-opd/agenticopd/internal/filesearch"
)

// One call of Go's regexp cannot be interrupted, and its cost is the input's length
// times the pattern's instructions: a 131 KB line matched in one call took 14 s
// against the 10 s deadline of the call. So search_files gives one match call at
// most searchMatchWindow bytes: a longer line is matched in windows of that size,
// each starting searchMatchWindow-searchMatchOverlap bytes after the last (the last
// one ends with the line), and the call's deadline and work budget are checked
// before each window. The matching is package internal/filesearch's, which the
// Kubernetes pod helper runs too ([Searcher]).
const (
	// searchMatchWindow is the most bytes one regexp match call is given.
	searchMatchWindow = filesearch.MatchWindow
	// searchMatchOverlap is how far consecutive windows of a line overlap: a
	// match of up to this many bytes lies whole in one window wherever it is in
	// the line.
	searchMatchOverlap = filesearch.MatchOverlap
)

// lineMatcher matches a search_files pattern against lines, within the call's
// budget (meter.match) and searchMatchWindow bytes per match call: a
// [filesearch.Matcher] counted on the call's meter.
type lineMatcher struct {
	fm *filesearch.Matcher
	// windowed counts the lines matched in windows.
	windowed int
}

func newLineMatcher(re *regexp.Regexp, cost int64, parsed *syntax.Regexp) *lineMatcher {
	return &lineMatcher{fm: filesearch.NewMatcher(re, cost, parsed)}
}

// match reports whether line holds a match of the pattern and, for a line matched
// in windows when locate is set, where the match begins (0 otherwise). It counts
// each match call's work on m before the call, and stops with m's error (a cap, the
// deadline) before a window the budget cannot pay for.
func (lm *lineMatcher) match(m *meter, line []byte, locate bool) (bool, int, error) {
	hit, at, err := lm.fm.Match(meterBudget{m}, line, locate)
	lm.windowed = lm.fm.Windowed()
	return hit, at, err
}

// meterBudget is a meter as a [filesearch.Budget].
type meterBudget struct{ m *meter }

func (b meterBudget) Match(cost, n int64) error { return b.m.match(cost, n) }
func (b meterBudget) Expired() error            { return b.m.expired() }
