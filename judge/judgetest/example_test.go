package judgetest_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/judge/judgetest"
)

// TestJudge checks a judge of one's own against the Judge contract.
func ExampleTestJudge() {
	never := judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		return judge.Hint{}, ctx.Err()
	})
	fmt.Println(judgetest.TestJudge(never))
	// Output: <nil>
}
