package agenticopd_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// The restart, fault and multi-process tests push hundreds of groups through Serve.
// They keep the real path from the policy server to the trajectory API (vllmtest over
// HTTP, the agent loop, the atropos client, its spool, atropostest over HTTP) and
// leave out what they do not test: each rollout is one assistant turn with no tool
// call, so the sandbox is never used and is a memory-only stand-in (memSandbox), and
// the tasks have no tests, so there is no verification run.

// memSandbox is a workspace-free sandbox: files in memory, no commands.
type memSandbox struct {
	mu    sync.Mutex
	files fstest.MapFS
}

func (s *memSandbox) Run(context.Context, rollout.Command) (rollout.CommandResult, error) {
	return rollout.CommandResult{ExitCode: 127, Stderr: []byte("memSandbox runs no commands")}, nil
}

func (s *memSandbox) ReadFile(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return append([]byte(nil), f.Data...), nil
}

func (s *memSandbox) WriteFile(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[name] = &fstest.MapFile{Data: append([]byte(nil), data...)}
	return nil
}

func (s *memSandbox) FS() fs.FS    { return s.files }
func (s *memSandbox) Close() error { return nil }

var memSandboxes = rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
	return &memSandbox{files: fstest.MapFS{}}, nil
})

// answerScript answers every rollout in one turn with a text unique to name and the
// rollout, so that every group has its own tokens.
func answerScript(name string) func(vllmtest.ScriptInput) (string, bool) {
	var n atomic.Int64
	return func(vllmtest.ScriptInput) (string, bool) {
		return fmt.Sprintf("Done: %s answer %d.", name, n.Add(1)), true
	}
}

// taskStream hands out tasks without tests, numbered.
func taskStream() tasks.Source {
	var n atomic.Int64
	return tasks.SourceFunc(func(ctx context.Context) (tasks.Task, error) {
		i := n.Add(1)
		return tasks.Task{ID: fmt.Sprintf("say-%d", i), Statement: fmt.Sprintf("Say that task %d is done.", i)}, ctx.Err()
	})
}

// fastEnv returns an env on sim whose rollouts take one policy turn.
func fastEnv(t testing.TB, policy *vllm.Client, mod func(*agenticopd.Config)) *agenticopd.Env {
	t.Helper()
	cfg := agenticopd.Config{
		Policy: policy, GroupSize: 2, MaxRollouts: 16, MaxGroups: 8, KeepEqualScores: true,
		SandboxFactory: memSandboxes, Tasks: taskStream(), PollInterval: 5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(t, err)
	return env
}

// closingHTTP returns an HTTP client whose idle connections close when the test ends.
func closingHTTP(t testing.TB, timeout time.Duration) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

// fastClient returns an atropos client for the API at url with fast polls.
func fastClient(t testing.TB, url, spool string, mod func(*atropos.ClientConfig)) *atropos.Client {
	t.Helper()
	cfg := atropos.ClientConfig{
		EnvName: "agentic_opd", GroupSize: 2, SpoolDir: spool, HTTPClient: closingHTTP(t, 0),
		PollInterval: 5 * time.Millisecond, StatusInterval: 5 * time.Millisecond,
		Retry: atropos.RetryConfig{MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := atropos.NewClient(url, cfg)
	require.NoError(t, err)
	return c
}

// groupKey identifies a group by its tokens (every rollout's text is unique).
func groupKey(g *atropos.ScoredDataGroup) string { return fmt.Sprint(g.Tokens) }
