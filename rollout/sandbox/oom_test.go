package sandbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox"
)

// TestMemoryFullBeforeStart: a command that leaves the sandbox's memory full behind
// it (a tmpfs workspace file is memory charged to the sandbox, and it outlives the
// command) makes the OOM killer take the next command's first processes, bubblewrap
// itself among them, before the command runs. That is the sandbox reaching its memory
// limit, reported as such (MemoryLimitHit, exit 137), never as bubblewrap failing to
// set the command up ([sandbox.ErrStart]): the first is the sandboxed code's doing,
// the second would be the host's.
func TestMemoryFullBeforeStart(t *testing.T) {
	f := newFactory(t, sandbox.Config{Limits: sandbox.Limits{Memory: 24 << 20}, DiskQuota: 64 << 20})
	if f.Enforcement().Cgroup == sandbox.CgroupNone || f.Enforcement().Storage != sandbox.StorageTmpfs {
		t.Fatalf("this test needs a cgroup and a tmpfs workspace (root): %+v", f.Enforcement())
	}
	sb := newSandbox(t, f)
	// The file grows by a megabyte a command until three commands in a row met the
	// limit. Whichever process the OOM killer takes (the writer, bubblewrap before
	// the writer ran), no command is a failure to start.
	hits, runs := 0, 0
	for ; runs < 80 && hits < 3; runs++ {
		res, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: "head -c 1000000 /dev/zero >> fill", Timeout: 20 * time.Second})
		require.NoError(t, err, "a full sandbox is not a failure to start (command %d)", runs+1)
		if res.MemoryLimitHit {
			hits++
			require.NotZero(t, res.ExitCode)
			require.Contains(t, string(res.Stderr), "memory limit")
		} else {
			hits = 0
		}
	}
	require.Equal(t, 3, hits, "the fill reached the limit")

	// The file leaves no room for an interpreter.
	res, err := sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"python3", "-c", "print('ran')"}, Timeout: 20 * time.Second})
	require.NoError(t, err, "a full sandbox is not a failure to start")
	require.True(t, res.MemoryLimitHit, "exit %d, stderr %s", res.ExitCode, res.Stderr)
	require.NotZero(t, res.ExitCode)
	require.NotContains(t, string(res.Stdout), "ran")
}
