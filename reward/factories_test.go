package reward_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// factories are the sandboxes the verifier is tested with: the library's bubblewrap
// sandbox, and the test-only unconfined dirSandbox.
var factories = []struct {
	name string
	make func(t *testing.T) rollout.SandboxFactory
}{
	{"bubblewrap", func(t *testing.T) rollout.SandboxFactory { return bwrapSandboxes(t) }},
	{"dir", func(t *testing.T) rollout.SandboxFactory { return dirFactory{t} }},
}

var bwrapFactory = sync.OnceValues(func() (*bwrap.Factory, error) {
	return bwrap.New(context.Background(), bwrap.Config{})
})

// bwrapSandboxes returns the factory of bubblewrap sandboxes, the library's default.
func bwrapSandboxes(t testing.TB) rollout.SandboxFactory {
	f, err := bwrapFactory()
	require.NoError(t, err, "bubblewrap and /usr/bin/python3 are required (.ci/run installs them)")
	return f
}

// forEachFactory runs check as a parallel subtest with each factory.
func forEachFactory(t *testing.T, check func(t *testing.T, f rollout.SandboxFactory)) {
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			check(t, f.make(t))
		})
	}
}
