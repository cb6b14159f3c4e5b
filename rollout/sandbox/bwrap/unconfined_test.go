package bwrap_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func TestUnconfined(t *testing.T) {
	t.Parallel()
	// Unconfined is an explicit choice and needs no bubblewrap at all.
	f := newFactory(t, bwrap.Config{Unconfined: true, UID: unconfinedUID, GID: unconfinedUID, BwrapPath: "/nonexistent/bwrap", OutputLimit: 100})
	require.True(t, f.Unconfined())
	require.Contains(t, f.Enforcement().HostPathVisible, "Config.Unconfined", "the factory says the code sees host paths")
	sb := newSandbox(t, f)
	require.Equal(t, sb.HostDir(), sb.Dir(), "commands see the host path")

	t.Run("runs python, marked unconfined", func(t *testing.T) {
		res := run(t, sb, `python -c "open('out.txt','w').write('unconfined')"; pwd`, 0)
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
		require.True(t, res.Unconfined)
		require.Equal(t, sb.HostDir()+"\n", string(res.Stdout))
		got, err := sb.ReadFile("out.txt")
		require.NoError(t, err)
		require.Equal(t, "unconfined", string(got))
		fi, err := os.Lstat(filepath.Join(sb.HostDir(), "out.txt"))
		require.NoError(t, err)
		wantUID := os.Geteuid()
		if wantUID == 0 {
			wantUID = unconfinedUID
		}
		require.Equal(t, wantUID, hostUID(fi), "uid drop when root")
	})

	t.Run("no descriptor leaks in", func(t *testing.T) {
		res := run(t, sb, "ls /proc/self/fd | tr '\\n' ' '", 0)
		require.Equal(t, "0 1 2 3 ", string(res.Stdout))
	})

	t.Run("no isolation", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		shell := fmt.Sprintf(`python3 -c "import socket; socket.create_connection(('127.0.0.1', %d), timeout=2); print('connected')"`,
			l.Addr().(*net.TCPAddr).Port)
		res := run(t, sb, shell, 10*time.Second)
		require.Equal(t, "connected\n", string(res.Stdout), "stderr: %s", res.Stderr)
		require.True(t, res.Unconfined)
	})

	t.Run("timeout kills group and setsid children", func(t *testing.T) {
		m := marker()
		shell := fmt.Sprintf(`sleep %[1]s1 & setsid sleep %[1]s2 & (setsid sh -c 'sleep %[1]s3 &' &); while :; do :; done`, m)
		type out struct {
			res rollout.CommandResult
			err error
		}
		ch := make(chan out, 1)
		go func() {
			res, err := sb.Run(t.Context(), rollout.Command{Shell: shell, Timeout: 2 * time.Second})
			ch <- out{res, err}
		}()
		waitForSleep(t, m+"2")
		waitForSleep(t, m+"3")
		o := <-ch
		require.NoError(t, o.err)
		require.True(t, o.res.TimedOut)
		require.True(t, o.res.Unconfined)
		require.Equal(t, 124, o.res.ExitCode)
		require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
	})

	t.Run("background processes die with the command", func(t *testing.T) {
		m := marker()
		res := run(t, sb, fmt.Sprintf(`sleep %[1]s1 & setsid sleep %[1]s2 & exit 0`, m), 0)
		require.Equal(t, 0, res.ExitCode)
		require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
	})

	t.Run("output cap", func(t *testing.T) {
		res, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: "head -c 1000 /dev/zero | tr '\\0' z"})
		require.NoError(t, err)
		require.True(t, res.OutputTruncated)
		require.True(t, res.Unconfined)
		require.Equal(t, strings.Repeat("z", 50)+"\n...[900 bytes cut]...\n"+strings.Repeat("z", 50), string(res.Stdout))
		require.Equal(t, int64(1000), res.StdoutBytes)
	})
}

func TestUnconfinedRunawayWriterIsKilled(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{Unconfined: true, UID: unconfinedUID, GID: unconfinedUID, KillOutputLimit: 1 << 20})
	sb := newSandbox(t, f)
	m := "runaway" + marker()
	res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"yes", m}, Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.OutputKilled)
	require.True(t, res.Unconfined)
	require.Empty(t, hostProcs(t, "yes", m))
}

func BenchmarkRunTrue(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  bwrap.Config
	}{
		{"bwrap", bwrap.Config{}},
		{"unconfined", bwrap.Config{Unconfined: true, UID: unconfinedUID, GID: unconfinedUID}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFactory(b, bc.cfg)
			sb := newSandbox(b, f)
			cmd := rollout.Command{Argv: []string{"/bin/true"}}
			for b.Loop() {
				res, err := sb.Run(b.Context(), cmd)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("run: %v, exit %d", err, res.ExitCode)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/run")
		})
	}
}

func BenchmarkRunPython(b *testing.B) {
	f := newFactory(b, bwrap.Config{})
	sb := newSandbox(b, f)
	cmd := rollout.Command{Argv: []string{"python3", "-c", "pass"}}
	for b.Loop() {
		res, err := sb.Run(b.Context(), cmd)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v, exit %d", err, res.ExitCode)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/run")
}

// unconfinedUID is the host uid of unconfined sandboxes when the tests run as root:
// their RLIMIT_NPROC counts every process of the uid on the host, and the bubblewrap
// sandboxes of tests running in parallel (other packages included) use the default uid.
const unconfinedUID = 65533

// With a cgroup, even a child that leaves the process group and clears its
// environment (so the marker sweep cannot find it) is killed with its command.
func TestUnconfinedCgroupCatchesClearedEnvironment(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{Unconfined: true, UID: unconfinedUID, GID: unconfinedUID})
	if e := f.Enforcement(); e.Cgroup == bwrap.CgroupNone {
		t.Skipf("no cgroup here (%s): the marker sweep alone cannot find this child", e.CgroupMissing)
	}
	sb := newSandbox(t, f)
	m := marker()
	// The command waits until the child runs with its cleared environment.
	res := run(t, sb, fmt.Sprintf(`setsid env -i /bin/sleep %[1]s >/dev/null 2>&1 < /dev/null &
while ! grep -q %[1]s /proc/[0-9]*/cmdline 2>/dev/null; do sleep 0.01; done; sleep 0.1; exit 0`, m), 10*time.Second)
	require.Equal(t, 0, res.ExitCode)
	require.Empty(t, hostProcs(t, "sleep", m), "a child with a cleared environment outlived its command")
}
