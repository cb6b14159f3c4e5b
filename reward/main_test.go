package reward_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/images/imagestest"
)

// TestMain checks for leaked goroutines. The registry imagestest.SWERef serves for
// the whole process, and the idle keep-alive connections of the clients that push to
// and pull from it, are expected.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(imagestest.IgnoreGoroutines()),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
