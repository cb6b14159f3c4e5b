package bwrap_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// chainName is the name of each directory of a chain.
const chainName = "d"

// makeChain makes in dir a chain of depth directories (dir/d/d/...), each of the
// given mode, by descriptors (one open per level, two held at a time), as an
// agent's command could (mkdir d, cd d, chmod 000 .., over and over).
func makeChain(t testing.TB, dir string, depth int, mode uint32) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for i := range depth {
		if err := unix.Mkdirat(fd, chainName, 0o700); err != nil {
			unix.Close(fd)
			require.NoError(t, err, "level %d", i+1)
		}
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		require.NoError(t, err, "level %d", i+1)
		fd = next
		require.NoError(t, unix.Fchmod(fd, mode))
	}
	unix.Close(fd)
}

// chmodChain sets the mode of every directory of the chain below dir, and reports
// how many there are. It needs root (a directory of mode 000 is opened as it is).
func chmodChain(t testing.TB, dir string, mode uint32) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	n := 0
	for {
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return n
		}
		fd = next
		n++
		require.NoError(t, unix.Fchmod(fd, mode))
	}
}

// chainModes reports, for the chain below dir, how many directories it holds and
// how many of them lack the owner's read, write or search bit.
func chainModes(t testing.TB, dir string) (n, denied int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for {
		next, err := unix.Openat(fd, chainName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return n, denied
		}
		fd = next
		n++
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(fd, &st))
		if st.Mode&0o700 != 0o700 {
			denied++
		}
	}
}

// cpuNow is the user and system CPU time of this process so far.
func cpuNow(t testing.TB) time.Duration {
	var ru unix.Rusage
	require.NoError(t, unix.Getrusage(unix.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRestoreDeepChain measures the host CPU of Restore in a workspace that
// holds a chain of directories of mode 000, per depth, reported as cpu-s/op
// (the process's user and system time over the call).
func BenchmarkRestoreDeepChain(b *testing.B) {
	for _, depth := range []int{2000, 10000, 99999} {
		b.Run(fmt.Sprint(depth), func(b *testing.B) {
			sb := newSandbox(b, newFactory(b, bwrap.Config{}))
			makeChain(b, sb.HostDir(), depth, 0)
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				require.Equal(b, depth, chmodChain(b, sb.HostDir(), 0))
				b.StartTimer()
				c0 := cpuNow(b)
				require.NoError(b, sb.Restore(b.Context()))
				cpu += cpuNow(b) - c0
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// BenchmarkRestoreManyFiles measures the host CPU of Restore in a workspace of
// 99,999 files of mode 000 in 100 directories of mode 000, as cpu-s/op.
func BenchmarkRestoreManyFiles(b *testing.B) {
	sb := newSandbox(b, newFactory(b, bwrap.Config{}))
	res, err := sb.Run(b.Context(), rollout.Command{Shell: `python3 -c "
import os
for d in range(100):
    os.mkdir('d%d' % d)
    for f in range(999 if d else 998):
        open('d%d/f%d' % (d, f), 'w').close()
"`, Timeout: 5 * time.Minute})
	require.NoError(b, err)
	require.Zero(b, res.ExitCode, "stderr %s", res.Stderr)
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		res, err := sb.Run(b.Context(), rollout.Command{Shell: "chmod 000 d*/* && chmod 000 d*", Timeout: 5 * time.Minute})
		require.NoError(b, err)
		require.Zero(b, res.ExitCode, "stderr %s", res.Stderr)
		b.StartTimer()
		c0 := cpuNow(b)
		require.NoError(b, sb.Restore(b.Context()))
		cpu += cpuNow(b) - c0
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkQuotaWalkDeepChain measures the host CPU of one command ("true") in a
// walked workspace ([bwrap.StorageWalk]) that holds a chain of directories, per
// depth, as cpu-s/op: the command's own cost on the host plus the quota walks
// while it runs and when it ends.
func BenchmarkQuotaWalkDeepChain(b *testing.B) {
	for _, depth := range []int{2000, 10000, 99999} {
		b.Run(fmt.Sprint(depth), func(b *testing.B) {
			f := newFactory(b, bwrap.Config{DisableWorkspaceMount: true})
			require.Equal(b, bwrap.StorageWalk, f.Enforcement().Storage)
			sb := newSandbox(b, f)
			makeChain(b, sb.HostDir(), depth, 0o755)
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuNow(b)
				res, err := sb.RunDetailed(b.Context(), rollout.Command{Argv: []string{"true"}, Timeout: 10 * time.Minute})
				cpu += cpuNow(b) - c0
				require.NoError(b, err)
				require.Zero(b, res.ExitCode, "stderr %s", res.Stderr)
				require.False(b, res.DiskQuotaExceeded)
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
