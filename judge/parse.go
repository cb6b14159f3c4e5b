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
	// UnparsedBadDecision: the last \boxed{…} holds a number other than 1 or -1.
	UnparsedBadDecision = "bad_decision"
	// UnparsedRequestFailed: the chat request for this vote failed.
	UnparsedRequestFailed = "request_failed"
	// UnparsedMissingChoice: the server answered with fewer choices than asked for, even
	// after separate requests.
	UnparsedMissingChoice = "missing_choice"
	// UnparsedEmptyContent: the choice's content was null or empty. A reasoning model
	// whose server runs a reasoning parser answers so when it spent max_tokens on
	// thinking (or thought without a closing tag); its reasoning is never read as a
	// vote. Turn thinking off with LLMConfig.ChatTemplateKwargs or raise MaxTokens.
	UnparsedEmptyContent = "empty_content"
)

// Markers of the LLM judge's output contract.
const (
	HintStart = "[HINT_START]"
	HintEnd   = "[HINT_END]"
)

// ParseVote reads one judge output the way the reference does:
//
//   - The decision is the last match of \boxed{-?DIGITS}, read as an integer ("01" is
//     1; "+1", " 1 " and "2" are not decisions). It counts only when it is 1 or -1;
//     otherwise the vote has Score 0 and an Unparsed reason.
//   - The hint is the text of the last [HINT_START]…[HINT_END] block (shortest match,
//     across lines), with surrounding whitespace removed, or "".
//
// Decision and hint are read independently: a vote may carry a hint with Score -1 or 0;
// selection ignores it. Digits and whitespace follow Python's rules (any Unicode decimal
// digit counts as a digit; ASCII separators U+001C–U+001F count as whitespace), so that
// the same text gives the same vote as in the reference.
func ParseVote(raw string) Vote {
	v := Vote{Raw: raw, Hint: lastHint(raw)}
	digits, ok := lastBoxed(raw)
	switch {
	case !ok:
		v.Unparsed = UnparsedNoDecision
	case digits == "1":
		v.Score = 1
	case digits == "-1":
		v.Score = -1
	default:
		v.Unparsed = UnparsedBadDecision
	}
	return v
}

// lastBoxed finds the last \boxed{-?DIGITS} in s and returns its value normalised to
// "1", "-1" or some other non-empty string when the value is neither.
func lastBoxed(s string) (string, bool) {
	const open = `\boxed{`
	found, value := false, ""
	for i := 0; ; {
		j := strings.Index(s[i:], open)
		if j < 0 {
			return value, found
		}
		start := i + j + len(open)
		i = i + j + 1
		if v, ok := boxedValue(s[start:]); ok {
			found, value = true, v
		}
	}
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
