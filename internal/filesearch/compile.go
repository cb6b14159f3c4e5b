package filesearch

import (
	"fmt"
	"regexp"
	"regexp/syntax"
)

// The pattern caps of search_files.
const (
	// MaxPatternInsts is the largest compiled pattern searched; MaxPatternLen the
	// longest pattern text compiled.
	MaxPatternInsts = 1000
	MaxPatternLen   = 4096
)

// Compile compiles a search_files pattern within the caps and returns its
// [Matcher], whose cost is that of matching one byte, in instructions (1 for a plain
// literal, which regexp finds with a substring search). It computes what package
// rollout's compileSearch computes; the host refuses a pattern over the caps with
// its own message before a pattern reaches the pod.
func Compile(pattern string) (*Matcher, error) {
	if len(pattern) > MaxPatternLen {
		return nil, fmt.Errorf("the pattern is %d bytes, over the %d search_files compiles", len(pattern), MaxPatternLen)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	if ProgSize(parsed) > progSizeBound {
		return nil, fmt.Errorf("the pattern compiles to more than %d instructions", MaxPatternInsts)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	n := int64(len(prog.Inst))
	if n > MaxPatternInsts {
		return nil, fmt.Errorf("the pattern compiles to %d instructions, over the %d search_files runs", n, MaxPatternInsts)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	if _, complete := re.LiteralPrefix(); complete {
		n = 1
	}
	return NewMatcher(re, n, parsed), nil
}

// progSizeBound is where ProgSize saturates: eight times MaxPatternInsts.
const progSizeBound = 8 * MaxPatternInsts

// ProgSize is a loose upper bound of the instructions re compiles to, with repeats
// expanded as Simplify expands them; it saturates just past 8*MaxPatternInsts, so a
// pattern of a few bytes that would compile to millions of instructions is refused
// before it is compiled.
func ProgSize(re *syntax.Regexp) int64 {
	const over = progSizeBound + 1
	sum := func(subs []*syntax.Regexp) int64 {
		var n int64
		for _, s := range subs {
			n = min(n+ProgSize(s), over)
		}
		return n
	}
	var n int64
	switch re.Op {
	case syntax.OpLiteral:
		n = int64(len(re.Rune)) + 1
	case syntax.OpConcat:
		n = sum(re.Sub) + 1
	case syntax.OpAlternate:
		n = sum(re.Sub) + int64(len(re.Sub))
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		n = sum(re.Sub) + 2
	case syntax.OpRepeat:
		times := int64(re.Max)
		if times < 0 {
			times = int64(re.Min) + 1
		}
		n = min(times*(sum(re.Sub)+2), over)
	default:
		n = sum(re.Sub) + 1
	}
	return min(n, over)
}
