package judge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reasons a vote could not be read, as found in [Vote.Unparsed]. The set is small and
// fixed so that callers can count votes by reason.
const (
	// UnparsedNoDecision: the output holds no \boxed{…} with an optional minus sign and
	// digits.
	UnparsedNoDecision = "no_decision"
	// UnparsedBadDecision: the \boxed{…} decisions hold a number other than 1 or -1.
	UnparsedBadDecision = "bad_decision"
	// UnparsedRequestFailed: the chat request for this vote failed.
	UnparsedRequestFailed = "request_failed"
	// UnparsedMissingChoice: the server answered with fewer choices than asked for, even
	// after separate requests.
	UnparsedMissingChoice = "missing_choice"
	// UnparsedEmptyContent: the choice's content was null or empty. A reasoning model
	// whose server runs a reasoning parser answers so when it thought without a closing
	// tag; its reasoning is never read as a vote. (When max_tokens cut the thinking,
	// the vote is [UnparsedTruncated], whatever its content.) Turn thinking off with
	// LLMConfig.ChatTemplateKwargs or raise MaxTokens.
	UnparsedEmptyContent = "empty_content"
	// UnparsedTruncated: the server cut the choice at max_tokens (finish_reason
	// "length"). A cut output is never read, whatever it holds: a judge that thinks
	// although thinking was turned off (a thinking-only model, no reasoning parser)
	// has its thoughts cut and delivered as content, and a hint drafted mid-thought
	// must not reach the teacher. Raise MaxTokens, or turn thinking off.
	UnparsedTruncated = "truncated"
	// UnparsedUnfinished: the server ended the choice for a reason other than a stop
	// or the max_tokens cut ("abort", "error", "tool_calls", "content_filter"), so its
	// content is not a finished answer.
	UnparsedUnfinished = "unfinished"
	// UnparsedUnknownFinish: the server did not say why it ended the choice
	// (finish_reason null or absent, or a [ChatModel] that reports no finish reasons),
	// so the choice may have been cut at max_tokens mid-thought; it is not read,
	// whatever it holds, as [UnparsedTruncated] is not. Judge with a server that reports
	// finish reasons (vLLM does).
	UnparsedUnknownFinish = "unknown_finish"
	// UnparsedOnlyThinking: the output is all thinking: nothing but white space is
	// left outside its <think>…</think> blocks (see [ParseVote]).
	UnparsedOnlyThinking = "only_thinking"
	// UnparsedConflictingDecisions: the output holds more than one \boxed{…} decision
	// and they differ (for example \boxed{1} and then \boxed{-1}).
	UnparsedConflictingDecisions = "conflicting_decisions"
)

// Tags of a reasoning model's thinking, as Qwen3 and DeepSeek-R1 templates write them.
const (
	thinkStart = "<think>"
	thinkEnd   = "</think>"
)

// Markers of the LLM judge's output contract.
const (
	HintStart = "[HINT_START]" // opens the hint text in the judge's output
	HintEnd   = "[HINT_END]"   // closes the hint text in the judge's output
)

// ParseVote reads one judge output. Only the answer is read, never the thinking:
//
//   - The answer is the text after the last </think> (all of it when there is none),
//     up to the first <think> after that. Text before a </think> is thinking even
//     without an opening tag, since a Qwen3-style template opens the block in the
//     prompt and the output starts mid-thought; an unclosed <think> runs to the end.
//     An output with thinking and a blank answer is [UnparsedOnlyThinking].
//   - The decision is read from every \boxed{-?DIGITS} of the answer, each as an
//     integer ("01" is 1, "2" is neither 1 nor -1; a \boxed{…} that is not -?DIGITS,
//     such as "+1" or " 1 ", is skipped). When they all agree, the decision counts
//     when it is 1 or -1 ([UnparsedBadDecision] otherwise); when they differ, the vote is
//     [UnparsedConflictingDecisions]. The system prompt asks for exactly one decision,
//     so a vote that contradicts itself is no vote; the reference took the last one.
//   - The hint is the text of the last [HINT_START]…[HINT_END] block of the answer
//     (shortest match, across lines), with surrounding whitespace removed, or "".
//
// Decision and hint are read independently: a vote may carry a hint with Score -1 or 0;
// selection ignores it. Digits and whitespace follow Python's rules (any Unicode decimal
// digit counts as a digit; ASCII separators U+001C–U+001F count as whitespace), so that
// an output without thinking and with one decision gives the same vote as in the
// reference.
//
// ParseVote sees the text only; the LLM judge also refuses choices that the server did
// not end with a stop, or did not say how it ended ([UnparsedTruncated],
// [UnparsedUnfinished], [UnparsedUnknownFinish]), before parsing.
func ParseVote(raw string) Vote {
	ans, thought := answer(raw)
	v := Vote{Raw: raw, Hint: lastHint(ans)}
	if thought && Strip(ans) == "" {
		v.Unparsed = UnparsedOnlyThinking
		return v
	}
	digits, ok := decision(ans)
	switch {
	case !ok:
		v.Unparsed = digits
	case digits == "1":
		v.Score = 1
	case digits == "-1":
		v.Score = -1
	default:
		v.Unparsed = UnparsedBadDecision
	}
	return v
}

// answer returns the part of raw outside thinking (see [ParseVote]) and whether
// thinking was found.
func answer(raw string) (string, bool) {
	s, thought := raw, false
	if i := strings.LastIndex(s, thinkEnd); i >= 0 {
		s, thought = s[i+len(thinkEnd):], true
	}
	if i := strings.Index(s, thinkStart); i >= 0 {
		s, thought = s[:i], true
	}
	return s, thought
}

// decision reads every \boxed{-?DIGITS} in s. It returns the common value normalised
// to "1", "-1" or "other" and true, or the Unparsed reason and false when there is no
// decision or the decisions differ.
func decision(s string) (string, bool) {
	const open = `\boxed{`
	value := ""
	for i := 0; ; {
		j := strings.Index(s[i:], open)
		if j < 0 {
			break
		}
		start := i + j + len(open)
		i = i + j + 1
		v, ok := boxedValue(s[start:])
		switch {
		case !ok:
		case value == "":
			value = v
		case v != value:
			return UnparsedConflictingDecisions, false
		}
	}
	if value == "" {
		return UnparsedNoDecision, false
	}
	return value, true
}

// boxedValue reads "-?DIGITS}" at the start of s and returns "1", "-1", or "other".
func boxedValue(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	n, nonzero, ndigits := 0, false, 0
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == '}' {
			break
		}
		d, ok := digitValue(r)
		if !ok {
			return "", false
		}
		ndigits++
		s = s[size:]
		if d != 0 || nonzero {
			nonzero = true
			if n < 10 { // enough to tell 1 from anything else
				n = n*10 + d
			}
		}
	}
	if ndigits == 0 || len(s) == 0 {
		return "", false
	}
	switch {
	case n == 1 && !neg:
		return "1", true
	case n == 1 && neg:
		return "-1", true
	default:
		return "other", true
	}
}

// digitValue returns the value of a Unicode decimal digit (category Nd). Decimal
// digits are encoded in contiguous runs of ten starting at zero, so the value is the
// distance from the start of the run modulo ten.
func digitValue(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if r < utf8.RuneSelf || !unicode.IsDigit(r) {
		return 0, false
	}
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return int(r-start) % 10, true
}

// lastHint returns the stripped text of the last [HINT_START]…[HINT_END] block.
func lastHint(s string) string {
	hint, found := "", false
	for {
		i := strings.Index(s, HintStart)
		if i < 0 {
			break
		}
		rest := s[i+len(HintStart):]
		j := strings.Index(rest, HintEnd)
		if j < 0 {
			break
		}
		hint, found = rest[:j], true
		s = rest[j+len(HintEnd):]
	}
	if !found {
		return ""
	}
	return Strip(hint)
}

// Strip removes leading and trailing whitespace as Python's str.strip does: Unicode
// white space plus the ASCII separators U+001C–U+001F.
func Strip(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// hintLen is a hint's length in code points, as the reference measures it.
func hintLen(s string) int { return utf8.RuneCountInString(s) }
