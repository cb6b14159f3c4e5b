package bwrap_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// TestMemoryFullBeforeStart: a command that leaves the sandbox's memory full behind
// it (a tmpfs workspace file is memory charged to the sandbox, and it outlives the
// command) makes the OOM killer take the next command's first processes, bubblewrap
// itself among them, before the command runs. That is the sandbox reaching its memory
// limit, reported as such (MemoryLimitHit, exit 137), never as bubblewrap failing to
// set the command up ([bwrap.ErrStart]): the first is the sandboxed code's doing,
// the second would be the host's.
func TestMemoryFullBeforeStart(t *testing.T) {
	f := newFactory(t, bwrap.Config{Limits: bwrap.Limits{Memory: 24 << 20}, DiskQuota: 64 << 20})
	if f.Enforcement().Cgroup == bwrap.CgroupNone || f.Enforcement().Storage != bwrap.StorageTmpfs {
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

// TestRestore: the sandboxed code takes the workspace away from its own owner
// (chmod 000 on the workspace, a directory, a file; a symlink to a host file in
// between). Restore gives it back, so the next command runs and reads the files,
// and changes nothing outside the workspace.
func TestRestore(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host.txt")
	require.NoError(t, os.WriteFile(host, []byte("host"), 0o400))
	cases := []struct {
		name string
		cfg  bwrap.Config
	}{
		{"tmpfs", bwrap.Config{}},
		{"walked", bwrap.Config{DisableWorkspaceMount: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFactory(t, tc.cfg)
			sb := newSandbox(t, f)
			require.NoError(t, sb.WriteFile("solution.py", []byte("print('solved')\n")))
			require.NoError(t, sb.WriteFile("pkg/mod.py", []byte("X = 1\n")))
			require.NoError(t, os.Symlink(host, filepath.Join(sb.HostDir(), "link")))
			res := run(t, sb, "chmod 000 solution.py pkg/mod.py && chmod 000 pkg && chmod 000 /workspace", 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)

			_, err := sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"python3", "solution.py"}, Timeout: 20 * time.Second})
			require.Error(t, err, "the workspace is unusable before Restore")
			t.Logf("before Restore: %v", err)

			require.NoError(t, sb.Restore(t.Context()))
			res = run(t, sb, "python3 solution.py && python3 -c 'import sys; sys.path.insert(0, \"pkg\"); import mod; print(mod.X)'", 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, "solved\n1\n", string(res.Stdout))
			fi, err := os.Stat(host)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o400), fi.Mode().Perm(), "the symlink's target outside is untouched")
		})
	}
}
