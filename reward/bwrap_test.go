package reward_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox"
	"github.com/agentic-opd/agenticopd/tasks"
)

// bwrapSandboxes returns a factory of bubblewrap sandboxes, the library's default.
func bwrapSandboxes(t *testing.T) func(t *testing.T) rollout.Sandbox {
	f, err := sandbox.New(context.Background(), sandbox.Config{})
	require.NoError(t, err, "bubblewrap and /usr/bin/python3 are required (.ci/run installs them)")
	return func(t *testing.T) rollout.Sandbox {
		sb, err := f.NewSandbox(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, sb.Close()) })
		return sb
	}
}

func TestVerifyBuiltinTasksInBubblewrap(t *testing.T) {
	runBuiltinVerification(t, bwrapSandboxes(t))
}

func TestVerifyEarlyExitDoesNotPassInBubblewrap(t *testing.T) {
	runEarlyExitChecks(t, bwrapSandboxes(t))
}

func TestVerifyInBubblewrapWithAReadOnlyWorkspace(t *testing.T) {
	// The agent may leave its workspace directory read-only for the sandboxed code.
	// The runner must still be able to report that the tests ran to their end.
	sb := bwrapSandboxes(t)(t)
	task := tasks.Builtin()[0]
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	res, err := sb.Run(context.Background(), rollout.Command{Shell: "chmod 555 . && ! touch probe 2>/dev/null"})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "the workspace is read-only inside: %s", res.Stderr)
	v, err := reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
	if os.Geteuid() != 0 {
		// A non-root host cannot write the tests into a directory without write
		// permission either: that is a sandbox error, not a score.
		require.Error(t, err)
		require.Equal(t, reward.RuleSandboxError, v.Rule)
		return
	}
	require.NoError(t, err)
	require.True(t, v.Completed, v.Output)
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
}

func TestVerifyInBubblewrapIsConfined(t *testing.T) {
	newSandbox := bwrapSandboxes(t)
	task := tasks.Task{ID: "net", TestCode: "import socket\n" +
		"s = socket.socket()\n" +
		"s.settimeout(1)\n" +
		"try:\n    s.connect(('1.1.1.1', 53))\n    print('network reachable')\n" +
		"except OSError as e:\n    print('no network:', e)\n" +
		"print('All tests passed!')\n"}
	v, err := reward.Verify(context.Background(), newSandbox(t), task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, v.Unconfined)
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
	require.Contains(t, v.Output, "no network:")
}

func TestVerifyInBubblewrapReportsSandboxTruncation(t *testing.T) {
	newSandbox := bwrapSandboxes(t)
	task := tasks.Task{ID: "loud", TestCode: "import sys\nsys.stdout.write('x' * (1 << 20))\nprint('All tests passed!')\n"}
	v, err := reward.Verify(context.Background(), newSandbox(t), task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, v.OutputTruncated)
	require.Equal(t, 0, v.ExitCode)
}
