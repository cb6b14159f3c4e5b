package judge_test

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/judge"
)

func ExampleParseVote() {
	v := judge.ParseVote("The test failed on fizzbuzz(15). \\boxed{1}\n[HINT_START] Check multiples of 15 before 3 and 5. [HINT_END]")
	fmt.Printf("%d %q\n", v.Score, v.Hint)
	v = judge.ParseVote(`\boxed{+1}`)
	fmt.Printf("%d %q\n", v.Score, v.Unparsed)
	// A thought (here begun in the prompt, so without its opening tag) is never read.
	v = judge.ParseVote("Maybe \\boxed{1} [HINT_START]Loop from 0.[HINT_END]</think>\n\n\\boxed{-1}")
	fmt.Printf("%d %q\n", v.Score, v.Hint)
	// Output:
	// 1 "Check multiples of 15 before 3 and 5."
	// 0 "no_decision"
	// -1 ""
}

func ExampleMajority() {
	votes := []judge.Vote{
		{Score: 1, Hint: "Check multiples of 15 before 3 and 5."},
		{Score: -1},
		{Score: -1},
	}
	fmt.Printf("LongestPositive: %q\n", judge.LongestPositive(votes))
	fmt.Printf("Majority: %q\n", judge.Majority(votes))
	// Output:
	// LongestPositive: "Check multiples of 15 before 3 and 5."
	// Majority: ""
}
