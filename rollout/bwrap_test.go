package rollout_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// TestAgentInBubblewrapSandbox runs the fix loop in the real sandbox: the model's code
// runs confined, and the file tools go through the sandbox's os.Root.
func TestAgentInBubblewrapSandbox(t *testing.T) {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	require.NoError(t, err, "bubblewrap and /usr/bin/python3 are required (.ci/run installs them)")
	sb, err := f.NewSandbox(ctx)
	require.NoError(t, err)
	defer sb.Close()

	s, client, rec := simulator(t, fixScript)
	a, err := rollout.NewAgent(client, rollout.Config{})
	require.NoError(t, err)
	tr, err := a.Run(ctx, startMessages, sb)
	require.NoError(t, err)
	require.Equal(t, rollout.StopNoToolCalls, tr.Stop, tr.Err)
	checkAgainstSimulator(t, tr, s, rec)
	require.Equal(t, 1.0, toolResult(t, tr.Messages[6])["exit_code"], tr.Messages[6].Content)
	require.Equal(t, 0.0, toolResult(t, tr.Messages[10])["exit_code"], tr.Messages[10].Content)
	require.Equal(t, "All tests passed!", toolResult(t, tr.Messages[10])["output"])

	res, err := sb.Run(ctx, rollout.Command{Shell: "cat solution.py"})
	require.NoError(t, err)
	require.False(t, res.Unconfined)
	require.Equal(t, "def add(a, b):\n    return a + b\n", string(res.Stdout))
}

// TestToolsTakeWorkspacePathsInBubblewrap: commands run in /workspace, so a model that
// writes "/workspace/solution.py" and runs it by that path works, and a path outside
// the workspace is refused by the file tools.
func TestToolsTakeWorkspacePathsInBubblewrap(t *testing.T) {
	ctx := context.Background()
	f, err := bwrap.New(ctx, bwrap.Config{})
	require.NoError(t, err, "bubblewrap and /usr/bin/python3 are required (.ci/run installs them)")
	sb, err := f.NewSandbox(ctx)
	require.NoError(t, err)
	defer sb.Close()
	tools := rollout.DefaultTools()

	got := callTool(t, tools, sb, "write_file", `{"path": "/workspace/solution.py", "content": "print('hello from', __file__)\n"}`)
	require.Equal(t, map[string]any{"path": "solution.py", "bytes_written": 30.0}, got)
	got = callTool(t, tools, sb, "terminal", `{"command": "pwd && python3 /workspace/solution.py"}`)
	require.Equal(t, map[string]any{"output": "/workspace\nhello from /workspace/solution.py", "exit_code": 0.0, "error": ""}, got)
	got = callTool(t, tools, sb, "patch", `{"path": "/workspace/solution.py", "old_string": "hello", "new_string": "bye"}`)
	require.Equal(t, 1.0, got["replacements"], got)
	got = callTool(t, tools, sb, "read_file", `{"path": "solution.py"}`)
	require.Equal(t, "     1|print('bye from', __file__)\n", got["content"])
	got = callTool(t, tools, sb, "search_files", `{"pattern": "bye", "path": "/workspace"}`)
	require.Equal(t, "solution.py:1: print('bye from', __file__)", got["matches"])

	got = callTool(t, tools, sb, "write_file", `{"path": "/tmp/outside.py", "content": "x"}`)
	require.Contains(t, got["error"], "outside the workspace")
	got = callTool(t, tools, sb, "read_file", `{"path": "/workspace/../etc/hostname"}`)
	require.Contains(t, got["error"], "outside the workspace")
}
