package judge

// MinHintChars is the length a hint must exceed, in code points after stripping, to be
// selected: a hint of 10 characters or fewer is ignored, as in the reference.
const MinHintChars = 10

// Selector chooses the hint of a turn from its votes, returning "" for no hint. A
// Selector must return either "" or the Hint of a vote with Score 1.
type Selector func(votes []Vote) string

// LongestPositive is the reference's rule: among votes with Score 1 and a hint longer
// than [MinHintChars], the longest hint wins, the first in vote order on ties. One
// positive vote suffices, however many votes are negative.
func LongestPositive(votes []Vote) string {
	best, bestLen := "", MinHintChars
	for _, v := range votes {
		if v.Score != 1 {
			continue
		}
		if n := hintLen(v.Hint); n > bestLen {
			best, bestLen = v.Hint, n
		}
	}
	return best
}

// Majority gives a hint only when more votes are positive (Score 1) than negative
// (Score -1); votes that could not be read count as neither. The hint is then chosen as
// by [LongestPositive]. With the default three votes, one positive vote and two
// unreadable ones give a hint; one positive and one negative vote do not.
//
// Majority is the default selection of [LLM].
func Majority(votes []Vote) string {
	pos, neg := 0, 0
	for _, v := range votes {
		switch v.Score {
		case 1:
			pos++
		case -1:
			neg++
		}
	}
	if pos <= neg {
		return ""
	}
	return LongestPositive(votes)
}
