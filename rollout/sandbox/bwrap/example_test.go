package bwrap_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func Example() {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{}) // probes bubblewrap once
	if err != nil {
		log.Fatal(err) // says how to install bubblewrap, or that namespaces are refused
	}
	sb, err := f.NewSandbox(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()

	if err := sb.WriteFile("solution.py", []byte("def add(a, b):\n    return a + b\n")); err != nil {
		log.Fatal(err)
	}
	res, err := sb.Run(ctx, rollout.Command{
		Shell: `python -c "from solution import add; print(add(2, 3))"; pwd; id -u`,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d\n%s", res.ExitCode, res.Stdout)
	// Output:
	// exit 0
	// 5
	// /workspace
	// 1000
}
