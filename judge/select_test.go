package judge_test

import (
	"testing"

	"github.com/agentic-opd/agenticopd/judge"
)

func votes(vs ...judge.Vote) []judge.Vote { return vs }

func v(score int, hint string) judge.Vote {
	vote := judge.Vote{Score: score, Hint: hint}
	if score == 0 {
		vote.Unparsed = judge.UnparsedNoDecision
	}
	return vote
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name              string
		votes             []judge.Vote
		longest, majority string
	}{
		{
			// The reference's example: 11 characters, first of the equal-length longest.
			name:     "reference example",
			votes:    votes(v(1, "short"), v(1, "0123456789A"), v(-1, "much longer than every other hint"), v(1, "abcdefghijk")),
			longest:  "0123456789A",
			majority: "0123456789A",
		},
		{
			name:     "one positive of three is enough for LongestPositive only",
			votes:    votes(v(-1, ""), v(1, "check the empty input case"), v(-1, "")),
			longest:  "check the empty input case",
			majority: "",
		},
		{
			name:     "tie between positive and negative votes",
			votes:    votes(v(1, "check the empty input case"), v(-1, "")),
			longest:  "check the empty input case",
			majority: "",
		},
		{
			name:     "unparsed votes count as neither",
			votes:    votes(v(0, ""), v(1, "check the empty input case"), v(0, "a very long hint without a decision")),
			longest:  "check the empty input case",
			majority: "check the empty input case",
		},
		{
			name:     "exactly ten characters is too short",
			votes:    votes(v(1, "0123456789"), v(1, "0123456789")),
			longest:  "",
			majority: "",
		},
		{
			name:     "length in code points",
			votes:    votes(v(1, "ééééééééééé"), v(1, "abcdefghijk")),
			longest:  "ééééééééééé",
			majority: "ééééééééééé",
		},
		{
			name:     "majority of positives picks the longest",
			votes:    votes(v(1, "a hint of some length"), v(1, "a longer hint of some more length"), v(-1, "")),
			longest:  "a longer hint of some more length",
			majority: "a longer hint of some more length",
		},
		{
			name:     "positive majority without a usable hint",
			votes:    votes(v(1, ""), v(1, "short"), v(-1, "")),
			longest:  "",
			majority: "",
		},
		{name: "no votes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judge.LongestPositive(tt.votes); got != tt.longest {
				t.Errorf("LongestPositive = %q, want %q", got, tt.longest)
			}
			if got := judge.Majority(tt.votes); got != tt.majority {
				t.Errorf("Majority = %q, want %q", got, tt.majority)
			}
		})
	}
}
