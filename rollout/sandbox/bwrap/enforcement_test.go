package bwrap_test

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func TestEnforcementIsReported(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := newFactory(t, bwrap.Config{Logger: logger})
	e := f.Enforcement()
	if e.Cgroup == bwrap.CgroupNone {
		// Not an error: the fallback is documented. Say what this machine lacks.
		t.Logf("no cgroup on this machine: %s", e.CgroupMissing)
		require.NotEmpty(t, e.PerProcessOnly)
		require.Contains(t, buf.String(), "per process only")
		return
	}
	require.Empty(t, e.CgroupMissing)
	require.Empty(t, e.PerProcessOnly)
	require.NotEmpty(t, e.CgroupDirs)
	if os.Geteuid() == 0 {
		require.Empty(t, buf.String(), "no warning with a cgroup")
	}
	if os.Geteuid() == 0 {
		require.Equal(t, bwrap.StorageTmpfs, e.Storage, e.StorageMissing)
	} else {
		require.Equal(t, bwrap.StorageWalk, e.Storage)
	}
}

func TestRlimitFallbackWarnsOnceNamingPerProcessLimits(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := newFactory(t, bwrap.Config{Logger: logger, DisableCgroup: true,
		Limits: bwrap.Limits{AddressSpace: 256 << 20}})
	e := f.Enforcement()
	require.Equal(t, bwrap.CgroupNone, e.Cgroup)
	require.Contains(t, e.CgroupMissing, "Config.DisableCgroup")
	require.Len(t, e.PerProcessOnly, 2)
	require.Contains(t, e.PerProcessOnly[0], "RLIMIT_AS")
	require.Contains(t, e.PerProcessOnly[1], "RLIMIT_NPROC")

	logs := buf.String()
	require.Equal(t, 1, strings.Count(logs, "level=WARN")-strings.Count(logs, "host path is visible"), logs)
	require.Contains(t, logs, "limits hold per process only")
	require.Contains(t, logs, "RLIMIT_AS")
	require.Contains(t, logs, "RLIMIT_NPROC")

	// The rlimits still hold per process, and nothing is reported as a
	// whole-sandbox limit; sandboxes and commands log nothing more.
	sb := newSandbox(t, f)
	res, err := sb.RunDetailed(t.Context(), commandShell(`python3 -c "
try:
    b = bytearray(512 << 20); print('allocated')
except MemoryError:
    print('MemoryError')"`))
	require.NoError(t, err)
	require.Equal(t, "MemoryError\n", string(res.Stdout))
	require.False(t, res.MemoryLimitHit)
	require.False(t, res.ProcessLimitHit)
	newSandbox(t, f)
	require.Equal(t, 1, strings.Count(buf.String(), "level=WARN")-strings.Count(buf.String(), "host path is visible"))
}

func TestStorageFallbackWithoutMount(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{DisableWorkspaceMount: true, DiskQuota: 1 << 20})
	e := f.Enforcement()
	require.Equal(t, bwrap.StorageWalk, e.Storage)
	require.NotEmpty(t, e.StorageMissing) // DisableWorkspaceMount, or not root
	sb := newSandbox(t, f)
	// A deleted file held open by a background process of the command counts.
	res, err := sb.RunDetailed(t.Context(), commandShell(
		`exec 3>held; rm held; head -c 2000000 /dev/zero >&3; sleep 30`))
	require.NoError(t, err)
	require.True(t, res.DiskQuotaExceeded, "stderr: %s", res.Stderr)
	require.False(t, res.TimedOut)

	// No quota: a plain directory, nothing measured.
	f = newFactory(t, bwrap.Config{DiskQuota: -1})
	require.Equal(t, bwrap.StorageNone, f.Enforcement().Storage)
	sb = newSandbox(t, f)
	res, err = sb.RunDetailed(t.Context(), commandShell("head -c 2000000 /dev/zero > f; echo ok"))
	require.NoError(t, err)
	require.False(t, res.DiskQuotaExceeded)
}

// Limits.Processes is the cgroup's pids.max where there is a cgroup, and RLIMIT_NPROC
// only where there is none: RLIMIT_NPROC also counts bubblewrap's own processes, which
// are outside the command's cgroup, so at the same number it refused forks before the
// cgroup did and the refusals went unreported.
func TestProcessesIsTheCgroupsOrRlimitNproc(t *testing.T) {
	t.Parallel()
	var host unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NPROC, &host))
	hostLimit := "-1" // Python's RLIM_INFINITY
	if host.Cur != unix.RLIM_INFINITY {
		hostLimit = strconv.FormatUint(host.Cur, 10)
	}
	for _, disable := range []bool{false, true} {
		f := newFactory(t, bwrap.Config{DisableCgroup: disable, Limits: bwrap.Limits{Processes: 40}})
		res := run(t, newSandbox(t, f), `python3 -c "import resource; print(resource.getrlimit(resource.RLIMIT_NPROC)[0])"`, 10*time.Second)
		if f.Enforcement().Cgroup == bwrap.CgroupNone {
			require.Equal(t, "40\n", string(res.Stdout), "without a cgroup, RLIMIT_NPROC holds Limits.Processes")
		} else {
			require.Equal(t, hostLimit+"\n", string(res.Stdout), "with a cgroup, RLIMIT_NPROC stays the host's")
		}
	}
}
