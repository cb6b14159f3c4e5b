package rollouttest_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// TestSandbox checks a sandbox against the Sandbox contract: here the bubblewrap one.
func ExampleTestSandbox() {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rollouttest.TestSandbox(ctx, sb)) // closes sb
	// Output: <nil>
}
