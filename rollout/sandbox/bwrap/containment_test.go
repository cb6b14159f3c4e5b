package bwrap_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// The hostile programs of the design reference (§9), each checked from the host.

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	require.NoError(t, sb.WriteFile("net.py", []byte(fmt.Sprintf(`
import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2)
    print("host: connected")
except OSError as e:
    print("host:", type(e).__name__)
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2)
print("inside: ok")
ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
print("ifaces:", ifaces)
print("routes:", len(open("/proc/net/route").readlines()) - 1)
`, port))))

	res := run(t, sb, "python3 net.py", 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	want := "host: ConnectionRefusedError\ninside: ok\nifaces: ['lo']\nroutes: 0\n"
	if diff := cmp.Diff(want, string(res.Stdout)); diff != "" {
		t.Errorf("network view (-want +got):\n%s", diff)
	}

	// Nothing reached the host listener.
	require.NoError(t, l.(*net.TCPListener).SetDeadline(time.Now().Add(50*time.Millisecond)))
	c, err := l.Accept()
	if err == nil {
		c.Close()
	}
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "host listener got a connection: %v", err)
}

func TestWritesOutsideWorkspaceDoNotReachHost(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	other := newSandbox(t, f)
	m := "outside_marker_" + marker()

	targets := []string{
		"/tmp/" + m,
		"/var/tmp/" + m,
		"/dev/shm/" + m,
		"/etc/" + m,
		"/usr/" + m,
		"/root/" + m,
		"/" + m,
		"/workspace/../" + m,
		filepath.Join(other.HostDir(), m), // another rollout's workspace, by host path
		filepath.Join(sb.HostDir(), m),    // this workspace's own host path
	}
	var script strings.Builder
	script.WriteString("import os\n")
	for _, p := range targets {
		fmt.Fprintf(&script, `
try:
    os.makedirs(os.path.dirname(%[1]q), exist_ok=True)
    open(%[1]q, "w").write("x")
    print("wrote", %[1]q)
except OSError as e:
    print("refused", %[1]q, e.strerror)
`, p)
	}
	require.NoError(t, sb.WriteFile("w.py", []byte(script.String())))
	res := run(t, sb, "python3 w.py", 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	out := string(res.Stdout)
	// The private /tmp and /dev/shm accept writes (inside only); the root refuses.
	require.Contains(t, out, "wrote /tmp/"+m)
	require.Contains(t, out, "wrote /dev/shm/"+m)
	require.Contains(t, out, "refused /etc/"+m+" Read-only file system")
	require.Contains(t, out, "refused /usr/"+m+" Read-only file system")

	for _, p := range targets {
		_, err := os.Lstat(p)
		if os.Geteuid() != 0 && errors.Is(err, fs.ErrPermission) {
			continue // e.g. /root: a non-root host cannot look, nor could the sandbox write
		}
		require.ErrorIs(t, err, fs.ErrNotExist, "%s reached the host (sandbox said: %s)", p, out)
	}
	_, err := other.ReadFile(m)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestHostSecretsAndPrivilegesAreOutOfReach(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)

	res := run(t, sb, "id -u; id -g; touch owned", 0)
	require.Equal(t, "1000\n1000\n", string(res.Stdout))
	fi, err := os.Lstat(filepath.Join(sb.HostDir(), "owned"))
	require.NoError(t, err)
	require.Equal(t, sandboxHostUID(), hostUID(fi), "host uid of the sandboxed code")
	if os.Geteuid() == 0 {
		require.NotEqual(t, 0, hostUID(fi), "sandboxed code must not be host root")
	}

	cases := []struct {
		name, shell, wantErr string
	}{
		{"shadow", "cat /etc/shadow", "No such file"},
		{"passwd", "cat /etc/passwd", "No such file"},
		{"home", "ls /root /home", "No such file"},
		{"sysctl", "echo 60 > /proc/sys/vm/swappiness", "Read-only file system"},
		{"nested userns", "unshare -Ur true", "unshare failed"},
		{"dev", "touch /dev/x", "Read-only file system"},
		{"mount", "mount -t tmpfs none /workspace", "must be superuser"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, sb, c.shell, 0)
			require.NotEqual(t, 0, res.ExitCode, "stdout: %s", res.Stdout)
			require.Contains(t, string(res.Stderr), c.wantErr)
		})
	}

	// No descriptor of the host leaks in (fd 3 is ls reading the directory).
	res = run(t, sb, "ls /proc/self/fd | tr '\\n' ' '", 0)
	require.Equal(t, "0 1 2 3 ", string(res.Stdout))

	// Only sandbox processes are visible; none of the host's.
	res = run(t, sb, "ls /proc | grep -c '^[0-9]'", 0)
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	require.NoError(t, err)
	require.Less(t, n, 10, "processes visible inside")
}

func TestSymlinkEscapeThroughFileToolsRefused(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)

	passwd, err := os.ReadFile("/etc/passwd")
	require.NoError(t, err)
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, []byte("host data"), 0o644))
	parent := filepath.Dir(sb.HostDir())

	res := run(t, sb, fmt.Sprintf(`ln -s /etc/passwd evil && ln -s %s abs && ln -s ../outside rel &&
mkdir d && ln -s / d/root && ln -s .. up && echo inside > real.txt && ln -s real.txt good`, target), 0)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)

	for _, name := range []string{"evil", "abs", "rel", "d/root/etc/passwd", "up/workspace/real.txt", "/etc/passwd", "../x"} {
		t.Run(name, func(t *testing.T) {
			_, err := sb.ReadFile(name)
			require.Error(t, err, "read through %s", name)
			require.Error(t, sb.WriteFile(name, []byte("pwned")), "write through %s", name)
			_, err = fs.ReadFile(sb.FS(), name)
			require.Error(t, err, "FS read through %s", name)
		})
	}
	// Nothing outside the workspace changed.
	got, err := os.ReadFile("/etc/passwd")
	require.NoError(t, err)
	require.Equal(t, string(passwd), string(got))
	got, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "host data", string(got))
	_, err = os.Lstat(filepath.Join(parent, "outside"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A link that stays inside works.
	got, err = sb.ReadFile("good")
	require.NoError(t, err)
	require.Equal(t, "inside\n", string(got))
}

func TestWriteThroughHardLinkRefused(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	res := run(t, sb, "echo original > a && ln a b && ln /usr/bin/true t 2>&1 || true", 0)
	require.Contains(t, string(res.Stdout), "Invalid cross-device link", "links to host files cannot be made")
	require.ErrorIs(t, sb.WriteFile("b", []byte("changed")), bwrap.ErrHardLinked)
	got, err := sb.ReadFile("a")
	require.NoError(t, err)
	require.Equal(t, "original\n", string(got))
}

func TestFIFOIsRefusedWithoutBlocking(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	res := run(t, sb, "mkfifo pipe", 0)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)

	_, err := sb.ReadFile("pipe")
	require.ErrorIs(t, err, bwrap.ErrNotRegular)
	require.Error(t, sb.WriteFile("pipe", []byte("x")))
	_, err = sb.FS().Open("pipe")
	require.ErrorIs(t, err, bwrap.ErrNotRegular)
}

func TestTimeoutKillsProcessGroupAndSetsidChildren(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	m := marker()

	type out struct {
		res rollout.CommandResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		// A child, a setsid child, a double-forked setsid daemon, then a busy loop.
		shell := fmt.Sprintf(`sleep %[1]s1 & setsid sleep %[1]s2 & (setsid sh -c 'sleep %[1]s3 &' &); echo started; while :; do :; done`, m)
		res, err := sb.Run(t.Context(), rollout.Command{Shell: shell, Timeout: 2 * time.Second})
		ch <- out{res, err}
	}()
	waitForSleep(t, m+"2")
	waitForSleep(t, m+"3")
	o := <-ch
	require.NoError(t, o.err)
	require.True(t, o.res.TimedOut)
	require.Equal(t, 124, o.res.ExitCode)
	require.Equal(t, "started\n", string(o.res.Stdout))
	require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
}

func TestBackgroundProcessesDieWithTheCommand(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	m := marker()
	shell := fmt.Sprintf(`sleep %[1]s1 & setsid sleep %[1]s2 & (setsid sh -c 'sleep %[1]s3 &' &); sleep 0.2; exit 0`, m)
	res, err := sb.Run(t.Context(), rollout.Command{Shell: shell, Timeout: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.False(t, res.TimedOut)
	require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
}

func TestOutputBeyondCapIsCut(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{OutputLimit: 1000})
	sb := newSandbox(t, f)
	res, err := sb.RunDetailed(t.Context(), rollout.Command{
		Shell: "printf HEAD; head -c 200000 /dev/zero | tr '\\0' a; printf TAIL; head -c 5000 /dev/zero | tr '\\0' b >&2",
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.True(t, res.OutputTruncated)
	require.False(t, res.OutputKilled)
	// Half the cap from the head, half from the tail: the end of the output is kept.
	a := strings.Repeat("a", 496)
	require.Equal(t, "HEAD"+a+"\n...[199008 bytes cut]...\n"+a+"TAIL", string(res.Stdout))
	b := strings.Repeat("b", 500)
	require.Equal(t, b+"\n...[4000 bytes cut]...\n"+b, string(res.Stderr))
	require.Equal(t, int64(200008), res.StdoutBytes)
	require.Equal(t, int64(5000), res.StderrBytes)

	// Many small writes: the tail is the stream's last bytes, in order.
	res, err = sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"seq", "1", "100000"}})
	require.NoError(t, err)
	var all strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&all, "%d\n", i)
	}
	want := all.String()
	require.Equal(t, int64(len(want)), res.StdoutBytes)
	require.Equal(t, want[:500]+fmt.Sprintf("\n...[%d bytes cut]...\n", len(want)-1000)+want[len(want)-500:], string(res.Stdout))

	// Exactly the cap is kept whole.
	res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "printf HEAD; head -c 992 /dev/zero | tr '\\0' a; printf TAIL"})
	require.NoError(t, err)
	require.False(t, res.OutputTruncated)
	require.Equal(t, "HEAD"+strings.Repeat("a", 992)+"TAIL", string(res.Stdout))

	res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "echo short"})
	require.NoError(t, err)
	require.False(t, res.OutputTruncated)
}

func TestRunawayWriterIsKilled(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{KillOutputLimit: 4 << 20})
	sb := newSandbox(t, f)
	m := "runaway" + marker()
	res, err := sb.RunDetailed(t.Context(), rollout.Command{Argv: []string{"yes", m}, Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.OutputKilled)
	require.False(t, res.TimedOut)
	require.True(t, res.OutputTruncated)
	require.Equal(t, 128+9, res.ExitCode)
	head, tail, cut := strings.Cut(string(res.Stdout), "\n...[")
	require.True(t, cut, "the cut is marked")
	require.Len(t, head, bwrap.DefaultOutputLimit/2)
	require.True(t, strings.HasPrefix(head, m+"\n"+m+"\n"))
	require.Contains(t, tail, m+"\n"+m+"\n")
	require.Greater(t, res.StdoutBytes, int64(4<<20))
	require.Empty(t, hostProcs(t, "yes", m))
}

func TestResourceLimits(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{Limits: bwrap.Limits{
		AddressSpace: 256 << 20, FileSize: 1 << 20, Processes: 32,
	}})
	sb := newSandbox(t, f)
	require.NoError(t, sb.WriteFile("limits.py", []byte(`
import os, sys, time
try:
    b = bytearray(512 << 20)
    print("memory: allocated")
except MemoryError:
    print("memory: MemoryError")
try:
    open("big", "wb").write(b"x" * (2 << 20))
    print("fsize: wrote")
except OSError as e:
    print("fsize:", e.strerror)
children = []
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    children.append(pid)
print("forks:", len(children))
`)))
	res := run(t, sb, "python3 limits.py", 20*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	out := string(res.Stdout)
	require.Contains(t, out, "memory: MemoryError")
	require.Contains(t, out, "fsize: File too large")
	var forks int
	_, err := fmt.Sscanf(out[strings.Index(out, "forks:"):], "forks: %d", &forks)
	require.NoError(t, err)
	require.Greater(t, forks, 0)
	require.Less(t, forks, 32, "RLIMIT_NPROC")
	fi, err := sb.FS().(fs.StatFS).Stat("big")
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), fi.Size())
}

func TestDiskQuota(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{DiskQuota: 1 << 20})
	sb := newSandbox(t, f)

	// Many files each under RLIMIT_FSIZE, then the command lingers: killed by the
	// periodic check, not by the timeout.
	res, err := sb.RunDetailed(t.Context(), rollout.Command{
		Shell:   "for i in 1 2 3 4; do head -c 400000 /dev/zero > f$i; done; sleep 30",
		Timeout: time.Minute,
	})
	require.NoError(t, err)
	require.True(t, res.DiskQuotaExceeded)
	require.False(t, res.TimedOut)
	require.Equal(t, 128+9, res.ExitCode)
	require.Contains(t, string(res.Stderr), "disk quota")

	// A quick command that ends over quota keeps its exit status but is marked. The
	// first check comes DiskCheckInterval after the start, and kills any command still
	// running over quota: on a loaded machine even `true` may start slower than that.
	kept := false
	for range 5 {
		res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "true"})
		require.NoError(t, err)
		require.True(t, res.DiskQuotaExceeded)
		if res.ExitCode == 0 {
			kept = true
			break
		}
		require.Equal(t, 128+9, res.ExitCode, "killed, and only by the check")
		require.GreaterOrEqual(t, res.Duration, bwrap.DiskCheckInterval, "killed, and only by the check")
	}
	require.True(t, kept, "a quick command kept its exit status in one of five runs")

	// Back under quota, commands run normally.
	for _, name := range []string{"f1", "f2", "f3"} {
		require.NoError(t, os.Remove(filepath.Join(sb.HostDir(), name)))
	}
	res, err = sb.RunDetailed(t.Context(), rollout.Command{Shell: "true"})
	require.NoError(t, err)
	require.False(t, res.DiskQuotaExceeded)
	require.Empty(t, res.Stderr)
}

func TestProcessLimitIsPerSandbox(t *testing.T) {
	t.Parallel()
	const limit = 24
	f := newFactory(t, bwrap.Config{Limits: bwrap.Limits{Processes: limit}})
	counter := []byte(`
import os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n, flush=True)
time.sleep(2)  # hold the children while the other sandbox counts
`)
	counts := make(chan string, 2)
	for range 2 {
		sb := newSandbox(t, f)
		require.NoError(t, sb.WriteFile("count.py", counter))
		go func() {
			res, err := sb.Run(t.Context(), rollout.Command{Shell: "python3 count.py", Timeout: 20 * time.Second})
			if err != nil {
				counts <- err.Error()
				return
			}
			counts <- strings.TrimSpace(string(res.Stdout))
		}()
	}
	for range 2 {
		n, err := strconv.Atoi(<-counts)
		require.NoError(t, err)
		// Each sandbox gets nearly the whole limit (the shell and python count too);
		// counted per uid, the second one would get almost nothing.
		require.Greater(t, n, limit/2)
		require.Less(t, n, limit)
	}
}

// TestManyCommandsWithinTheProcessLimit: a sandbox runs many more commands, one after
// another, than its process limit. bubblewrap's first process exits before the
// sandbox's init is gone; an init left to the host's pid 1 to reap counted against the
// limit until it was reaped, so where pid 1 reaps late (or never: a program run as a
// container's pid 1) the sandbox could start no command after about limit of them.
func TestManyCommandsWithinTheProcessLimit(t *testing.T) {
	t.Parallel()
	const limit = 8
	f := newFactory(t, bwrap.Config{Limits: bwrap.Limits{Processes: limit}})
	sb := newSandbox(t, f)
	for i := range 6 * limit {
		res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"/bin/true"}})
		require.NoError(t, err, "command %d", i)
		require.Equal(t, 0, res.ExitCode, "command %d: %s", i, res.Stderr)
	}
}

// TestOverlaidWorkspaceKeepsItsFilesOnDisk: a workspace that is not a tmpfs is an
// overlay (so that no host path shows inside), mounted by the library as root and in
// a user namespace of its own otherwise; it must still behave as the plain directory
// it replaces, for the code inside and for the host: files, hard links, deletions,
// ownership, the quota, and nothing left mounted or running after Close.
func TestOverlaidWorkspaceKeepsItsFilesOnDisk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  bwrap.Config
	}{
		{"walked", bwrap.Config{DisableWorkspaceMount: true, DiskQuota: 8 << 20}},
		{"no quota", bwrap.Config{DiskQuota: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFactory(t, c.cfg)
			if e := f.Enforcement(); e.HostPathVisible != "" {
				t.Skipf("no overlaid workspace on this host: %s", e.HostPathVisible)
			}
			sb, err := f.NewSandbox(t.Context())
			require.NoError(t, err)
			s := sb.(*bwrap.Sandbox)
			res := run(t, sb, "grep ' /workspace ' /proc/self/mountinfo", 10*time.Second)
			require.Contains(t, string(res.Stdout), " - overlay overlay ", "the workspace is an overlay")
			if os.Geteuid() == 0 {
				require.Contains(t, mountsAt(t, s.HostDir()), " - overlay ", "mounted on the host")
			}
			res = run(t, sb, "echo one > a && mkdir d && ln a d/b && echo two > c && rm c && stat -c '%h %u' a && cat d/b", 10*time.Second)
			require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
			require.Equal(t, "2 1000\none\n", string(res.Stdout))
			// The host sees the same files, owned by the sandbox uid, on disk.
			fi, err := os.Stat(filepath.Join(filepath.Dir(s.HostDir()), "data", "d", "b"))
			require.NoError(t, err, "the files are on disk in the upper layer")
			require.Equal(t, sandboxHostUID(), hostUID(fi))
			data, err := sb.ReadFile("d/b")
			require.NoError(t, err)
			require.Equal(t, "one\n", string(data))
			require.ErrorIs(t, sb.WriteFile("a", []byte("x")), bwrap.ErrHardLinked)
			require.NoError(t, sb.WriteFile("new.txt", []byte("from the host")))
			res = run(t, sb, "cat new.txt && ls -a", 10*time.Second)
			require.Equal(t, "from the host. .. a d new.txt ", strings.ReplaceAll(string(res.Stdout), "\n", " "))
			if c.cfg.DiskQuota > 0 {
				res, err := s.RunDetailed(t.Context(), rollout.Command{Shell: "head -c 9000000 /dev/zero > big; sleep 30", Timeout: 20 * time.Second})
				require.NoError(t, err)
				require.True(t, res.DiskQuotaExceeded, "the walk measures the overlay; stderr: %s", res.Stderr)
			}
			hostDir := s.HostDir()
			require.NoError(t, sb.Close())
			require.Empty(t, mountsAt(t, hostDir), "a mount was left")
			_, err = os.Stat(filepath.Dir(hostDir))
			require.ErrorIs(t, err, os.ErrNotExist, "the sandbox's directory (or, without root, its namespace) was left")
		})
	}
}

// mountsAt lists the lines of this process's mountinfo whose mount point is dir.
func mountsAt(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestEveryRlimitHoldsForTheCommand: the rlimits are those of the Limits, soft and
// hard, for the command and whatever it starts, whoever sets them.
func TestEveryRlimitHoldsForTheCommand(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{Limits: bwrap.Limits{
		AddressSpace: 900 << 20, FileSize: 5 << 20, OpenFiles: 100, CPUTime: 7 * time.Second,
	}})
	res := run(t, newSandbox(t, f), "cat /proc/self/limits", 20*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	limits := map[string][]string{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if name, rest, ok := strings.Cut(line, "  "); ok {
			limits[name] = strings.Fields(rest)
		}
	}
	for name, want := range map[string]string{
		"Max address space":  strconv.Itoa(900 << 20),
		"Max file size":      strconv.Itoa(5 << 20),
		"Max open files":     "100",
		"Max cpu time":       "7",
		"Max core file size": "0",
	} {
		require.GreaterOrEqual(t, len(limits[name]), 2, "%s in %q", name, res.Stdout)
		require.Equal(t, []string{want, want}, limits[name][:2], "%s (soft, hard)", name)
	}
}
