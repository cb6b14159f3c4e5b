package judge_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/agentic-opd/agenticopd/judge"
)

func TestParseVote(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantScore int
		wantHint  string
		unparsed  string
	}{
		// The reference's behavioural examples.
		{"positive with hint", `\boxed{1} [HINT_START] use sorted() [HINT_END]`, 1, "use sorted()", ""},
		{"conflicting decisions", `\boxed{1}\boxed{-1}`, 0, "", judge.UnparsedConflictingDecisions},
		{"not plus or minus one", `\boxed{2} [HINT_START]a[HINT_END]`, 0, "a", judge.UnparsedBadDecision},
		{"last hint block wins", "\\boxed{1}[HINT_START]first hint here[HINT_END] and [HINT_START]\n second one \n[HINT_END]", 1, "second one", ""},
		{"leading zero", `\boxed{01}`, 1, "", ""},
		{"plus sign", `\boxed{+1}`, 0, "", judge.UnparsedNoDecision},
		{"spaces", `\boxed{ 1 }`, 0, "", judge.UnparsedNoDecision},
		// More edges of the same rules.
		{"empty", "", 0, "", judge.UnparsedNoDecision},
		{"negative leading zero", `\boxed{-01}`, -1, "", ""},
		{"minus zero", `\boxed{-0}`, 0, "", judge.UnparsedBadDecision},
		{"huge", `\boxed{100000000000000000000000000001}`, 0, "", judge.UnparsedBadDecision},
		{"invalid boxed after valid is skipped", `\boxed{-1} then \boxed{+1}`, -1, "", ""},
		{"unclosed boxed", `\boxed{1`, 0, "", judge.UnparsedNoDecision},
		{"double minus", `\boxed{--1}`, 0, "", judge.UnparsedNoDecision},
		{"arabic-indic one", `\boxed{١}`, 1, "", ""},
		{"fullwidth minus one", `\boxed{-１}`, -1, "", ""},
		{"hint across lines", "[HINT_START]line one\nline two[HINT_END]\\boxed{1}", 1, "line one\nline two", ""},
		{"hint without end", `\boxed{1} [HINT_START] dangling`, 1, "", ""},
		{"end before start", `[HINT_END] x [HINT_START] y [HINT_END]`, 0, "y", judge.UnparsedNoDecision},
		{"nested start takes shortest", `[HINT_START] a [HINT_START] b [HINT_END]`, 0, "a [HINT_START] b", judge.UnparsedNoDecision},
		{"python whitespace", "[HINT_START]\x1c\u00a0hint\u3000\x1f[HINT_END]", 0, "hint", judge.UnparsedNoDecision},
		{"zero width space is kept", "[HINT_START]\u200bhint[HINT_END]", 0, "\u200bhint", judge.UnparsedNoDecision},
		// Several decisions.
		{"agreeing decisions", `\boxed{1} so, again, \boxed{01} [HINT_START]Run the tests first.[HINT_END]`, 1, "Run the tests first.", ""},
		{"bad then good", `\boxed{2} no, \boxed{1}`, 0, "", judge.UnparsedConflictingDecisions},
		{"options listed", `The answer is \boxed{1} or \boxed{-1}; I pick \boxed{1}`, 0, "", judge.UnparsedConflictingDecisions},
		{"repeated bad", `\boxed{3} \boxed{3}`, 0, "", judge.UnparsedBadDecision},
		// Thinking is never read.
		{"decision after closed thinking", "<think>maybe \\boxed{-1}</think> \\boxed{1}", 1, "", ""},
		{"hint in closed thinking", "<think>\\boxed{1} [HINT_START]Draft from thought.[HINT_END]</think>\n\nI cannot tell.", 0, "", judge.UnparsedNoDecision},
		{"mid-thought start", "So \\boxed{1} [HINT_START]Draft from thought.[HINT_END] or not.</think>\n\nNo lesson.", 0, "", judge.UnparsedNoDecision},
		{"mid-thought start then answer", "So \\boxed{1}?</think>\n\n\\boxed{-1}", -1, "", ""},
		{"unclosed thinking", "<think>\\boxed{1} [HINT_START]Draft from thought.[HINT_END]", 0, "", judge.UnparsedOnlyThinking},
		{"unclosed thinking after answer", "\\boxed{-1} <think>no, \\boxed{1} [HINT_START]Draft from thought.[HINT_END]", -1, "", ""},
		{"only closed thinking", "<think>\\boxed{1}</think>\n \n", 0, "", judge.UnparsedOnlyThinking},
		{"decision between thinking blocks is thought", "<think>a</think>\\boxed{1}<think>\\boxed{-1}</think> [HINT_START]Read the error first.[HINT_END]", 0, "Read the error first.", judge.UnparsedNoDecision},
		{"hint split by thinking", "\\boxed{1} [HINT_START]half <think>x</think> rest[HINT_END]", 0, "", judge.UnparsedNoDecision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := judge.Vote{Score: tt.wantScore, Hint: tt.wantHint, Raw: tt.raw, Unparsed: tt.unparsed}
			if diff := cmp.Diff(want, judge.ParseVote(tt.raw)); diff != "" {
				t.Errorf("ParseVote(%q) (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

// The reference's expressions, in Go's syntax, with Python's \d (any decimal digit).
var (
	refBoxed = regexp.MustCompile(`\\boxed\{(-?\p{Nd}+)\}`)
	refHint  = regexp.MustCompile(`(?s)\[HINT_START\](.*?)\[HINT_END\]`)
)

// Thinking, as ParseVote reads it: everything up to the last </think>, and everything
// from a <think> on.
var (
	oracleThoughtBefore = regexp.MustCompile(`(?s)^.*</think>`)
	oracleThoughtAfter  = regexp.MustCompile(`(?s)<think>.*$`)
)

// refParse is the reference's parser written with regular expressions, as an oracle,
// with this library's two changes: thinking is removed first, and decisions that differ
// give no score.
func refParse(s string) (score int, hint string) {
	s = oracleThoughtAfter.ReplaceAllString(oracleThoughtBefore.ReplaceAllString(s, ""), "")
	if m := refBoxed.FindAllStringSubmatch(s, -1); len(m) > 0 {
		values := map[int64]bool{}
		for _, sub := range m {
			digits := []rune(sub[1])
			for i, r := range digits {
				if r != '-' {
					digits[i] = '0' + rune(digitValueRef(r))
				}
			}
			n, err := strconv.ParseInt(string(digits), 10, 64)
			if err != nil || (n != 1 && n != -1) {
				n = 2 // neither: one "other" value
			}
			values[n] = true
		}
		for n := range values {
			if len(values) == 1 && (n == 1 || n == -1) {
				score = int(n)
			}
		}
	}
	if m := refHint.FindAllStringSubmatch(s, -1); len(m) > 0 {
		hint = strings.TrimFunc(m[len(m)-1][1], func(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) })
	}
	return score, hint
}

// digitValueRef is the value of a decimal digit: its distance from the start of its
// run of digits, modulo ten.
func digitValueRef(r rune) int {
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return int(r-start) % 10
}

func FuzzParseVote(f *testing.F) {
	for _, s := range []string{
		`\boxed{1} [HINT_START] use sorted() [HINT_END]`, `\boxed{1}\boxed{-1}`, `\boxed{01}`,
		`\boxed{+1}`, `\boxed{ 1 }`, `\boxed{2} [HINT_START]a[HINT_END]`, `\boxed{١}`,
		"[HINT_START]a[HINT_END][HINT_START]b[HINT_END]", `\boxed{\boxed{1}}`,
		"<think>\\boxed{1}</think>\\boxed{-1}", "x \\boxed{1}</think> [HINT_START]h[HINT_END]<think>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := judge.ParseVote(s)
		if v.Raw != s {
			t.Fatalf("Raw = %q, want the input", v.Raw)
		}
		if (v.Score == 0) != (v.Unparsed != "") {
			t.Fatalf("Score %d with Unparsed %q", v.Score, v.Unparsed)
		}
		if judge.Strip(v.Hint) != v.Hint || !strings.Contains(s, v.Hint) {
			t.Fatalf("hint %q is not a stripped part of the input", v.Hint)
		}
		score, hint := refParse(s)
		if v.Score != score || v.Hint != hint {
			t.Fatalf("ParseVote(%q) = (%d, %q), reference gives (%d, %q)", s, v.Score, v.Hint, score, hint)
		}
	})
}
