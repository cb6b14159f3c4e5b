package filesearch

import (
	"regexp"
	"regexp/syntax"
)

// One call of Go's regexp cannot be interrupted, and its cost is the input's length
// times the pattern's instructions: a 131 KB line matched in one call took 14 s
// against the 10 s deadline of the call. So search_files gives one match call at
// most MatchWindow bytes: a longer line is matched in windows of that size, each
// starting MatchWindow-MatchOverlap bytes after the last (the last one ends with the
// line), and the call's deadline and work budget are checked before each window.
const (
	// MatchWindow is the most bytes one regexp match call is given.
	MatchWindow = 4 << 10
	// MatchOverlap is how far consecutive windows of a line overlap: a match of up
	// to this many bytes lies whole in one window wherever it is in the line.
	MatchOverlap = 1 << 10
)

// The rule for a line longer than MatchWindow, which the search_files result states
// when a line was matched so: a match of up to MatchOverlap bytes is found wherever
// it lies; a longer one only when it lies within one window. ^ and \A match only
// where the line begins, $ and \z only where it ends, as for a line matched whole
// (each window is matched with a variant of the pattern in which those assertions
// never match at a window's edge that is not the line's); \b and \B at a window's
// edge see the edge as the line's.

// Budget is what a match call is counted against: Match counts the work of one call
// of a pattern of cost instructions on n bytes before it is made and refuses (an
// error) what the budget cannot pay for; Expired reports the call's deadline.
type Budget interface {
	Match(cost, n int64) error
	Expired() error
}

// Matcher matches a search_files pattern against lines, within a [Budget] and
// MatchWindow bytes per match call. It is not safe for concurrent use (it makes the
// anchored variants of its pattern when first needed, and counts).
type Matcher struct {
	re     *regexp.Regexp
	cost   int64 // instructions per byte
	parsed *syntax.Regexp
	// anchored is set when the pattern has a ^, $, \A or \z; variants[v] is the
	// pattern for windows that do not begin (v&1) or end (v&2) the line, made
	// when first needed.
	anchored bool
	variants [4]*regexp.Regexp
	windowed int
}

// NewMatcher returns a matcher of re, whose program has cost instructions (1 for a
// plain literal) and whose parsed form is parsed.
func NewMatcher(re *regexp.Regexp, cost int64, parsed *syntax.Regexp) *Matcher {
	lm := &Matcher{re: re, cost: cost, parsed: parsed, anchored: hasTextAnchor(parsed)}
	lm.variants[0] = re
	return lm
}

// Cost is the pattern's instructions per byte.
func (lm *Matcher) Cost() int64 { return lm.cost }

// Windowed counts the lines matched in windows so far.
func (lm *Matcher) Windowed() int { return lm.windowed }

// Match reports whether line holds a match of the pattern and, for a line matched
// in windows when locate is set, where the match begins (0 otherwise). It counts
// each match call's work on b before the call, and stops with b's error (a cap, the
// deadline) before a window the budget cannot pay for.
func (lm *Matcher) Match(b Budget, line []byte, locate bool) (bool, int, error) {
	if len(line) <= MatchWindow || lm.cost == 1 {
		// A plain literal is found by a substring search, one step a byte, and is
		// never split (the pattern can be as long as a window).
		if err := b.Match(lm.cost, int64(len(line))); err != nil {
			return false, 0, err
		}
		return lm.re.Match(line), 0, nil
	}
	lm.windowed++
	const step = MatchWindow - MatchOverlap
	for start := 0; ; start += step {
		end := min(start+MatchWindow, len(line))
		if err := b.Match(lm.cost, int64(end-start)); err != nil {
			return false, 0, err
		}
		if err := b.Expired(); err != nil {
			return false, 0, err
		}
		re, err := lm.variant(start > 0, end < len(line))
		if err != nil {
			return false, 0, err
		}
		if !locate {
			if re.Match(line[start:end]) {
				return true, 0, nil
			}
		} else if loc := re.FindIndex(line[start:end]); loc != nil {
			return true, start + loc[0], nil
		}
		if end == len(line) {
			return false, 0, nil
		}
	}
}

// variant is the pattern for a window that does not begin the line (midStart) or
// does not end it (midEnd).
func (lm *Matcher) variant(midStart, midEnd bool) (*regexp.Regexp, error) {
	if !lm.anchored {
		return lm.re, nil
	}
	v := 0
	if midStart {
		v |= 1
	}
	if midEnd {
		v |= 2
	}
	if lm.variants[v] == nil {
		re, err := regexp.Compile(withoutAnchors(lm.parsed, midStart, midEnd).String())
		if err != nil {
			return nil, err
		}
		lm.variants[v] = re
	}
	return lm.variants[v], nil
}

// hasTextAnchor reports whether re holds a ^, $, \A or \z (in either mode).
func hasTextAnchor(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return true
	}
	for _, s := range re.Sub {
		if hasTextAnchor(s) {
			return true
		}
	}
	return false
}

// withoutAnchors returns a copy of re in which ^ and \A (when begin) and $ and \z
// (when end) never match. A line holds no newline, so in either mode ^ matches
// only where the line begins and $ only where it ends.
func withoutAnchors(re *syntax.Regexp, begin, end bool) *syntax.Regexp {
	c := *re
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText:
		if begin {
			c = syntax.Regexp{Op: syntax.OpNoMatch, Flags: re.Flags}
		}
	case syntax.OpEndLine, syntax.OpEndText:
		if end {
			c = syntax.Regexp{Op: syntax.OpNoMatch, Flags: re.Flags}
		}
	}
	if len(re.Sub) > 0 {
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			c.Sub[i] = withoutAnchors(s, begin, end)
		}
	}
	return &c
}
