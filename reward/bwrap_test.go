package reward_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestVerifyInBubblewrapWithAReadOnlyWorkspace(t *testing.T) {
	// The agent may leave its workspace directory read-only for the sandboxed code;
	// the solution process only reads it.
	f := bwrapSandboxes(t)
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	defer sb.Close()
	task := tasks.Builtin()[0]
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	res, err := sb.Run(context.Background(), rollout.Command{Shell: "chmod 555 . && ! touch probe 2>/dev/null"})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "the workspace is read-only inside: %s", res.Stderr)
	v, err := reward.Verify(context.Background(), sb, f, task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, v.Completed, v.Output)
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
}

func TestVerifyInBubblewrapIsConfined(t *testing.T) {
	probe := "import socket\n" +
		"s = socket.socket()\n" +
		"s.settimeout(1)\n" +
		"try:\n    s.connect(('1.1.1.1', 53))\n    print('network reachable')\n" +
		"except OSError as e:\n    print('no network:', e)\n"
	task := tasks.Task{ID: "net", TestCode: probe + "from solution import f\nassert f() == 1\nprint('All tests passed!')\n"}
	v := verifyWork(t, bwrapSandboxes(t), task, agentWork{"solution.py": probe + "def f():\n    return 1\n"})
	require.False(t, v.Unconfined)
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
	require.Contains(t, v.Output, "no network:", "the test side")
	require.Contains(t, v.SolutionOutput, "no network:", "the solution side")
}

func TestVerifyInBubblewrapReportsSandboxTruncation(t *testing.T) {
	task := tasks.Task{ID: "loud", TestCode: "import sys\nsys.stdout.write('x' * (1 << 20))\nprint('All tests passed!')\n"}
	v := verifyWork(t, bwrapSandboxes(t), task, nil)
	require.True(t, v.OutputTruncated)
	require.Equal(t, 0, v.ExitCode)
}

func TestVerifyWithTheUnconfinedSandbox(t *testing.T) {
	f, err := bwrap.New(context.Background(), bwrap.Config{Unconfined: true})
	require.NoError(t, err)
	task := tasks.Builtin()[5]
	v := verifyWork(t, f, task, agentWork{"solution.py": task.ReferenceSolution})
	require.Equal(t, reward.RulePassed, v.Rule, "%s\n%s", v.Reason, v.Output)
	require.True(t, v.Unconfined, "the verification says the sandboxes isolated nothing")
	requireFails(t, verifyWork(t, f, task, agentWork{"solution.py": stubFor(task)}))
}

// TestVerifyConversationIsNotOutput: what the tests and the solution say to each other
// over the relay's pipes is not output the sandbox caps: a conversation many times the
// hard output cap still verifies a correct solution at 1.0, and a wrong one fails.
func TestVerifyConversationIsNotOutput(t *testing.T) {
	f, err := bwrap.New(context.Background(), bwrap.Config{OutputLimit: 256 << 10, KillOutputLimit: 1 << 20})
	require.NoError(t, err)
	task := tasks.Task{ID: "chatty", TestCode: "from solution import f\nxs = 'x' * (64 << 10)\n" +
		"for i in range(64):\n    assert f(xs) == len(xs) + i\nprint('All tests passed!')\n"}
	right := "n = 0\ndef f(xs):\n    global n\n    n += 1\n    return len(xs) + n - 1\n"
	v := verifyWork(t, f, task, agentWork{"solution.py": right})
	require.Equal(t, reward.RulePassed, v.Rule, v.Reason)
	require.Equal(t, 1.0, v.Correctness)
	require.False(t, v.OutputTruncated)
	v = verifyWork(t, f, task, agentWork{"solution.py": "def f(xs):\n    return len(xs)\n"})
	require.LessOrEqual(t, v.Correctness, 0.2, v.Reason)
}
