package atropos_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
)

func TestMain(m *testing.M) {
	switch os.Getenv("ATROPOS_TEST_HELPER") {
	case "env":
		os.Exit(helperEnv())
	case "api":
		os.Exit(helperAPI())
	case "crash-env":
		os.Exit(helperCrashEnv())
	case "pause-env":
		os.Exit(helperPauseEnv())
	}
	goleak.VerifyTestMain(m)
}

// helperEnv is the env process of TestKilledProcessLosesNothing: it registers, says so,
// waits for "go" on stdin, then sends groups until it is killed.
func helperEnv() int {
	c, err := atropos.NewClient(os.Getenv("ATROPOS_URL"), atropos.ClientConfig{
		EnvName: "killed", GroupSize: 2, SpoolDir: os.Getenv("ATROPOS_SPOOL"),
		Retry: atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if err := c.Register(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("registered")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { _ = c.Send(ctx, group(float64(i), 2)) })
	}
	wg.Wait()
	fmt.Println("sent")
	return 0
}
