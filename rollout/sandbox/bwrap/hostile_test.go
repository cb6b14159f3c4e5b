package bwrap_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// The hostile suite: each case is what an agent's code could do, run as a terminal
// command (or through the file tools) in a sandbox with the default flags and small
// limits (256 MiB of memory, 64 processes, a 32 MiB workspace). Each must be
// contained, show in the command's result, and leave the sandbox and the factory
// able to run the next command. After all of them: no process of the sandbox uid is
// left, the host's free disk and memory are back within 5%, and the host files the
// cases aimed at are unchanged.

const (
	hostileMemory = 256 << 20
	hostilePids   = 64
	hostileQuota  = 32 << 20
)

// hostileFactory makes the suite's factory. It skips only when the machine cannot
// create the namespaces.
func hostileFactory(t *testing.T, cfg bwrap.Config) *bwrap.Factory {
	t.Helper()
	f, err := bwrap.New(t.Context(), cfg)
	if errors.Is(err, bwrap.ErrNamespacesDenied) {
		t.Skipf("this machine cannot create the namespaces bubblewrap needs: %v", err)
	}
	require.NoError(t, err, "sandbox probe")
	return f
}

// needCgroup skips a case that only a cgroup can contain, naming what is missing.
func needCgroup(t *testing.T, f hostileTarget) {
	t.Helper()
	if e := f.Enforcement(); e.Cgroup == bwrap.CgroupNone {
		t.Skipf("no cgroup for the sandbox (%s); memory and pids hold per process only", e.CgroupMissing)
	}
}

// hostileRun runs shell and requires that the sandbox itself did not fail.
func hostileRun(t *testing.T, sb *bwrap.Sandbox, shell string, timeout time.Duration) bwrap.Result {
	t.Helper()
	res, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: shell, Timeout: timeout})
	require.NoError(t, err, "run %q", shell)
	return res
}

// stillWorks checks that the sandbox and the factory run the next command.
func stillWorks(t *testing.T, f hostileTarget, sb *bwrap.Sandbox) {
	t.Helper()
	res := hostileRun(t, sb, "echo next", 10*time.Second)
	require.Equal(t, "next\n", string(res.Stdout), "the sandbox runs the next command; stderr: %s", res.Stderr)
	other := f.sandbox(t)
	res = hostileRun(t, other, "echo fresh", 10*time.Second)
	require.Equal(t, "fresh\n", string(res.Stdout), "the factory runs the next rollout")
}

// hostState is what the suite must leave as it found it.
type hostState struct {
	freeDisk, freeMemory uint64
	sums                 map[string]string
}

func takeHostState(t *testing.T, files []string) hostState {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(os.TempDir(), &st))
	h := hostState{freeDisk: st.Bavail * uint64(st.Bsize), freeMemory: memAvailable(t), sums: map[string]string{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		h.sums[f] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return h
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

// uidProcs lists the host processes whose real uid is uid.
func uidProcs(uid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 && f[0] == strconv.Itoa(uid) {
					cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
					out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
				}
			}
		}
	}
	return out
}

func TestHostile(t *testing.T) {
	// The image cases' image: the Debian test image with a repository at /testbed.
	src := &imageSource{}
	imageDir := src.add(t, "hostile", under("testbed", repoFiles), bwrap.ImageRoot{WorkingDir: "/testbed"})
	hostileSuite(t, src, "hostile", imageDir, true)
}

// hostileSuite runs the suite's cases against sandboxes over the image ref of src,
// whose root is imageDir on the host, and with plain against plain sandboxes too.
func hostileSuite(t *testing.T, src bwrap.RootSource, ref, imageDir string, plain bool) {
	// A uid of its own (as root), so that "no process of the sandbox uid is left"
	// is about this suite alone.
	uid := 61000 + rand.IntN(1000)
	secretDir := t.TempDir()
	require.NoError(t, os.Chmod(secretDir, 0o755))
	secret := filepath.Join(secretDir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("host secret "+marker()), 0o666))
	targets := []string{secret, "/etc/passwd", "/etc/hosts"}
	before := takeHostState(t, targets)

	base := reachableTempDir(t) // the suite's own, so that what it leaves is its own
	cfg := bwrap.Config{
		UID: uid, GID: uid, DiskQuota: hostileQuota, Timeout: 20 * time.Second, BaseDir: base,
		Limits: bwrap.Limits{Memory: hostileMemory, Processes: hostilePids, AddressSpace: -1},
	}
	f := hostileFactory(t, cfg)
	e := f.Enforcement()
	t.Logf("enforcement: cgroup %q %v (missing: %q), storage %q (missing: %q)",
		e.Cgroup, e.CgroupDirs, e.CgroupMissing, e.Storage, e.StorageMissing)
	// The same cases against sandboxes over an image's root (NewSandboxFor).
	imageCfg := cfg
	imageCfg.Images = src
	imageSpec := &rollout.SandboxSpec{Image: ref}
	for _, tg := range []struct {
		prefix string
		cfg    bwrap.Config
		spec   *rollout.SandboxSpec
	}{{"", cfg, nil}, {"Image", imageCfg, imageSpec}} {
		if tg.spec == nil && !plain {
			continue
		}
		f := hostileTarget{Factory: hostileFactory(t, tg.cfg), spec: tg.spec}
		if tg.spec != nil {
			f.imageDir = imageDir
		}
		walkCfg := tg.cfg
		walkCfg.DisableWorkspaceMount = true
		walk := f
		walk.Factory = hostileFactory(t, walkCfg)
		noQuotaCfg := tg.cfg
		noQuotaCfg.DiskQuota = -1
		noQuota := f
		noQuota.Factory = hostileFactory(t, noQuotaCfg)
		hostileCases(t, tg.prefix, f, walk, noQuota, secret)
	}

	// After the suite (every sandbox is closed by its case's cleanup).
	if os.Geteuid() == 0 {
		var left []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if left = uidProcs(uid); len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		require.Empty(t, left, "processes of the sandbox uid %d left", uid)
	}
	after := takeHostState(t, targets)
	require.Equal(t, before.sums, after.sums, "host files the suite aimed at")
	require.GreaterOrEqual(t, float64(after.freeDisk), 0.95*float64(before.freeDisk), "host free disk")
	// What the suite could hold of the host's memory after it: a workspace tmpfs or an
	// overlay still mounted (its processes are checked above). The host's available
	// memory is only logged: other work on the machine (other test packages) moves it.
	require.Empty(t, mountsUnder(t, base), "mounts of the suite's sandboxes left")
	t.Logf("host: free disk %d → %d MiB, available memory %d → %d MiB (other work included)",
		before.freeDisk>>20, after.freeDisk>>20, before.freeMemory>>20, memAvailable(t)>>20)
}

func hostileForkBomb(t *testing.T, f hostileTarget) {
	needCgroup(t, f)
	sb := f.sandbox(t)
	res := hostileRun(t, sb, "bomb() { bomb | bomb & }; bomb; sleep 5", 3*time.Second)
	t.Logf("fork bomb: exit %d, timed out %v", res.ExitCode, res.TimedOut)
	require.True(t, res.TimedOut || res.ExitCode != 0, "the bomb was stopped")
	require.True(t, res.ProcessLimitHit, "the sandbox's pids limit refused forks")
	require.Contains(t, string(res.Stderr), "limit of 64 processes")
	stillWorks(t, f, sb)
}

func hostileMemoryOne(t *testing.T, f hostileTarget) {
	needCgroup(t, f)
	sb := f.sandbox(t)
	// 1 GiB, touched page by page; no RLIMIT_AS in this suite, so only the
	// cgroup stops it.
	res := hostileRun(t, sb, `python3 -c "b = bytearray(1 << 30); print('allocated', len(b))"`, 20*time.Second)
	require.NotContains(t, string(res.Stdout), "allocated")
	require.True(t, res.MemoryLimitHit, "exit %d, stderr %s", res.ExitCode, res.Stderr)
	require.Equal(t, 128+9, res.ExitCode)
	require.Contains(t, string(res.Stderr), "memory limit")
	stillWorks(t, f, sb)
}

func hostileMemoryEight(t *testing.T, f hostileTarget) {
	needCgroup(t, f)
	sb := f.sandbox(t)
	// Eight processes of 64 MiB each: every one is under any per-process limit,
	// together they are twice the sandbox's.
	require.NoError(t, sb.WriteFile("eight.py", []byte(`
import os, time
pids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        b = bytearray(64 << 20)
        time.sleep(3)
        os._exit(0)
    pids.append(pid)
ok = sum(1 for p in pids if os.waitpid(p, 0)[1] == 0)
print("survived", ok)
`)))
	res := hostileRun(t, sb, "python3 eight.py", 20*time.Second)
	require.True(t, res.MemoryLimitHit, "exit %d, stdout %s, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	require.NotContains(t, string(res.Stdout), "survived 8")
	stillWorks(t, f, sb)
}

func hostileMemfd(t *testing.T, f hostileTarget) {
	needCgroup(t, f)
	sb := f.sandbox(t)
	require.NoError(t, sb.WriteFile("memfd.py", []byte(`
import os
fd = os.memfd_create("hog")
chunk = b"x" * (1 << 20)
n = 0
try:
    for n in range(1, 1025):
        os.write(fd, chunk)
    print("wrote", n, "MiB")
except OSError as e:
    print("refused after", n, "MiB:", e.strerror)
`)))
	res := hostileRun(t, sb, "python3 memfd.py", 20*time.Second)
	require.NotContains(t, string(res.Stdout), "wrote 1024")
	require.True(t, res.MemoryLimitHit || strings.Contains(string(res.Stdout), "refused"),
		"exit %d, stdout %s, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	stillWorks(t, f, sb)
}

func hostileMemTmpfs(t *testing.T, f hostileTarget) {
	needCgroup(t, f)
	sb := f.sandbox(t)
	// 200 MB in the sandbox's /tmp (a tmpfs, within its 256 MiB size; files under
	// RLIMIT_FSIZE) are memory too: 100 MiB more in a process is over the sandbox's
	// 256 MiB.
	res := hostileRun(t, sb, `for i in 1 2 3 4; do head -c 50000000 /dev/zero > /tmp/fill$i || exit; done && echo filled &&
python3 -c "b = bytearray(100 << 20); print('allocated')"`, 20*time.Second)
	require.Contains(t, string(res.Stdout), "filled")
	require.NotContains(t, string(res.Stdout), "allocated")
	require.True(t, res.MemoryLimitHit, "exit %d, stderr %s", res.ExitCode, res.Stderr)

	// Through the terminal tool, the model reads the same verdict.
	got := callTool(t, sb, "terminal", `{"command": "python3 -c 'b = bytearray(1 << 30)'"}`)
	require.Contains(t, got["output"], "memory limit of 268435456 bytes")
	stillWorks(t, f, sb)
}

func hostileLoop(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	m := marker()
	res := hostileRun(t, sb, fmt.Sprintf(
		`setsid sh -c 'while :; do :; done # %[1]s' & sh -c 'while :; do :; done # %[1]s' & while :; do :; done`, m),
		2*time.Second)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)
	require.Empty(t, hostProcs(t, m), "loops left running")
	stillWorks(t, f, sb)
}

func hostileNetwork(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer tl.Close()
	ul, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ul.Close()
	require.NoError(t, sb.WriteFile("net.py", []byte(fmt.Sprintf(`
import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2); print("tcp: connected")
except OSError as e:
    print("tcp:", type(e).__name__)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"hello", ("127.0.0.1", %d)); print("udp: sent (to the sandbox's own loopback)")
except OSError as e:
    print("udp:", type(e).__name__)
try:
    socket.getaddrinfo("example.com", 80); print("dns: resolved")
except OSError as e:
    print("dns:", type(e).__name__)
`, tl.Addr().(*net.TCPAddr).Port, ul.LocalAddr().(*net.UDPAddr).Port))))
	res := hostileRun(t, sb, "python3 net.py", 10*time.Second)
	out := string(res.Stdout)
	require.Contains(t, out, "tcp: ConnectionRefusedError")
	require.Contains(t, out, "dns: gaierror")
	require.NotContains(t, out, "resolved")

	// Nothing reached the host's listeners.
	require.NoError(t, tl.(*net.TCPListener).SetDeadline(time.Now().Add(50*time.Millisecond)))
	if c, err := tl.Accept(); err == nil {
		c.Close()
		t.Fatal("the host TCP listener got a connection")
	}
	require.NoError(t, ul.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	buf := make([]byte, 16)
	n, _, err := ul.ReadFrom(buf)
	require.Error(t, err, "the host UDP socket got %q", buf[:n])
	stillWorks(t, f, sb)
}

func hostileWrites(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	m := "hostile_" + marker()
	var shell strings.Builder
	for _, p := range []string{"/tmp/", "/etc/", "../", sb.Dir() + "/../", "/dev/shm/", "$HOME/", "/var/tmp/", "/usr/", "/root/"} {
		fmt.Fprintf(&shell, "echo x > %s%s 2>/dev/null && echo wrote %s; ", p, m, p)
	}
	res := hostileRun(t, sb, shell.String(), 10*time.Second)
	t.Logf("inside: %s", res.Stdout)
	home, _ := os.UserHomeDir()
	dirs := []string{"/tmp", "/etc", "/dev/shm", "/var/tmp", "/usr", "/root", home,
		filepath.Dir(sb.HostDir()), filepath.Dir(filepath.Dir(sb.HostDir()))}
	if f.imageDir != "" { // nothing reaches the image's own files either
		for _, d := range []string{"", "tmp", "etc", "var/tmp", "usr", "root", "testbed"} {
			dirs = append(dirs, filepath.Join(f.imageDir, d))
		}
	}
	for _, dir := range dirs {
		_, err := os.Lstat(filepath.Join(dir, m))
		if errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
			continue // this test cannot look there either (the code ran as this uid)
		}
		require.ErrorIs(t, err, os.ErrNotExist, "%s reached the host's %s", m, dir)
	}
	stillWorks(t, f, sb)
}

func hostileReadHost(t *testing.T, f hostileTarget, secret string) {
	sb := f.sandbox(t)
	res := hostileRun(t, sb, "cat "+secret+"; cat /etc/shadow; cat /etc/passwd", 10*time.Second)
	require.NotContains(t, string(res.Stdout), "host secret")
	require.Contains(t, string(res.Stderr), "No such file")
	if f.imageDir == "" {
		require.NotEqual(t, 0, res.ExitCode)
	} else {
		// The image's own /etc/passwd, never the host's. Its /etc/shadow is the
		// image's too: closed where it belongs to a root the sandbox's user namespace
		// does not map, readable to the image's root (as under docker) where the
		// image cache gave it to the sandbox's uid (an ordinary user's own cache).
		want, err := os.ReadFile(filepath.Join(f.imageDir, "etc/passwd"))
		require.NoError(t, err)
		if !strings.Contains(string(res.Stderr), "/etc/shadow: Permission denied") {
			shadow, err := os.ReadFile(filepath.Join(f.imageDir, "etc/shadow"))
			require.NoError(t, err, "the image's /etc/shadow was read inside: it is the sandbox uid's")
			want = append(shadow, want...)
		}
		require.Equal(t, string(want), string(res.Stdout))
	}
	got := callTool(t, sb, "read_file", fmt.Sprintf(`{"path": %q}`, secret))
	require.Contains(t, got["error"], "outside the workspace")
	stillWorks(t, f, sb)
}

func hostileSignals(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	m := marker()
	victim := exec.Command("sleep", m)
	require.NoError(t, victim.Start())
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	res := hostileRun(t, sb, fmt.Sprintf(`kill -9 -1; kill -9 %d; for p in $(seq 2 400); do kill -9 $p; done 2>/dev/null;
python3 -c "
import os
for p in range(1, 5000):
    try: os.kill(p, 9)
    except OSError: pass
"`, victim.Process.Pid), 10*time.Second)
	t.Logf("signals: exit %d", res.ExitCode)
	require.NoError(t, victim.Process.Signal(syscall.Signal(0)), "a host process was killed from inside")
	stillWorks(t, f, sb)
}

func hostileStdout(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	res := hostileRun(t, sb, "head -c 1000000000 /dev/zero", 20*time.Second)
	require.True(t, res.OutputKilled)
	require.True(t, res.OutputTruncated)
	require.LessOrEqual(t, len(res.Stdout), bwrap.DefaultOutputLimit+64)
	total := res.StdoutBytes + res.StderrBytes
	require.Greater(t, total, int64(bwrap.DefaultKillOutputLimit))
	require.Less(t, total, int64(1e9), "killed long before the end")
	t.Logf("1 GB to stdout: killed after %d MiB", total>>20)
	stillWorks(t, f, sb)
}

func hostileDaemon(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	m := marker()
	res := hostileRun(t, sb, fmt.Sprintf(
		`setsid sh -c 'sleep %[1]s1 &' ; (sleep %[1]s2 &) ; nohup sleep %[1]s3 >/dev/null 2>&1 & python3 -c "
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '%[1]s4'])
"; exit 0`, m), 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.False(t, res.TimedOut)
	require.Empty(t, hostProcs(t, "sleep", m), "a daemon outlived its command")
	stillWorks(t, f, sb)
}

func hostileHardLink(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	res := hostileRun(t, sb, "ln /usr/bin/python3 py; ln /etc/ld.so.cache c; echo a > mine && ln mine twin && echo linked", 10*time.Second)
	require.Contains(t, string(res.Stderr), "Invalid cross-device link")
	require.Contains(t, string(res.Stdout), "linked")
	got := callTool(t, sb, "write_file", `{"path": "mine", "content": "b"}`)
	require.Contains(t, got["error"], "hard links")
	stillWorks(t, f, sb)
}

func hostileQuotaFiles(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	// Files each under RLIMIT_FSIZE, together over the quota; then the command
	// lingers, so the check (not the timeout) stops it.
	res := hostileRun(t, sb, "for i in 1 2 3 4; do head -c 12000000 /dev/zero > f$i; done; sleep 30", 20*time.Second)
	require.True(t, res.DiskQuotaExceeded, "exit %d, stderr %s", res.ExitCode, res.Stderr)
	require.False(t, res.TimedOut)
	require.Contains(t, string(res.Stderr), "disk quota")
	hostileRun(t, sb, "rm -f f1 f2 f3 f4", 10*time.Second)
	stillWorks(t, f, sb)
}

func hostileQuotaDeleted(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	// The file is deleted but held open: no walk of the workspace sees it.
	require.NoError(t, sb.WriteFile("held.py", []byte(`
import os, time
f = open("held", "wb")
os.unlink("held")
chunk = b"x" * (1 << 20)
n = 0
try:
    for n in range(1, 49):
        f.write(chunk); f.flush()
except OSError as e:
    print("refused after", n, "MiB:", e.strerror, flush=True)
time.sleep(30)
`)))
	res := hostileRun(t, sb, "python3 held.py", 20*time.Second)
	require.True(t, res.DiskQuotaExceeded, "exit %d, stdout %s, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	require.False(t, res.TimedOut)
	stillWorks(t, f, sb)
}

// hostileIdle100k runs an idle command in a workspace of about 100,000 entries and
// reports the host CPU the Go process spent meanwhile (the enforcement of the
// limits; BenchmarkIdleCommand100k carries the figure).
func hostileIdle100k(t *testing.T) {
	f := hostileTarget{Factory: hostileFactory(t, bwrap.Config{})}
	sb := f.sandbox(t)
	fill100k(t, sb)
	share := idleShare(t.Context(), t, sb, 2*time.Second)
	t.Logf("host CPU over an idle 2 s command in a 100k-entry workspace (%s): %.2f%% of a core",
		f.Enforcement().Storage, share*100)
	stillWorks(t, f, sb)
}

// fill100k makes 99,900 entries in the workspace (100 directories of 998 files),
// with the sandbox's own tools.
func fill100k(t testing.TB, sb *bwrap.Sandbox) {
	t.Helper()
	res, err := sb.Run(context.Background(), rollout.Command{Shell: `python3 -c "
import os
for d in range(100):
    os.mkdir('d%d' % d)
    for f in range(998):
        open('d%d/f%d' % (d, f), 'w').close()
"`, Timeout: 5 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
}

// idleShare runs "sleep d" and returns the CPU time of this process (user and
// system, all threads; the sandbox's processes are not in it) over the wall time.
func idleShare(ctx context.Context, t testing.TB, sb *bwrap.Sandbox, d time.Duration) float64 {
	t.Helper()
	var before, after syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &before))
	start := time.Now()
	res, err := sb.RunDetailed(ctx, rollout.Command{Shell: fmt.Sprintf("sleep %g", d.Seconds()), Timeout: d + 10*time.Second})
	wall := time.Since(start)
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &after))
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.False(t, res.DiskQuotaExceeded)
	cpu := time.Duration(after.Utime.Nano() - before.Utime.Nano() + after.Stime.Nano() - before.Stime.Nano())
	return cpu.Seconds() / wall.Seconds()
}

// BenchmarkIdleCommand100k measures the host CPU spent on enforcing the limits while
// an idle command runs in a 100k-entry workspace, per storage mode: a tmpfs
// workspace (root) and the walked directory of the unprivileged fallback.
func BenchmarkIdleCommand100k(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  bwrap.Config
	}{
		{"tmpfs", bwrap.Config{}},
		{"walk", bwrap.Config{DisableWorkspaceMount: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFactory(b, bc.cfg)
			sb := newSandbox(b, f)
			fill100k(b, sb)
			var sum float64
			for b.Loop() {
				sum += idleShare(b.Context(), b, sb, time.Second)
			}
			b.ReportMetric(100*sum/float64(b.N), "%core/command")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// A command started with Start (streaming stdin and stdout) is held by the same
// cgroup as one given to Run.
func TestHostileStartedCommandIsInTheCgroup(t *testing.T) {
	t.Parallel()
	f := hostileTarget{Factory: hostileFactory(t, bwrap.Config{Limits: bwrap.Limits{Memory: hostileMemory, Processes: hostilePids, AddressSpace: -1}})}
	needCgroup(t, f)
	sb := f.sandbox(t)
	p, err := sb.Start(t.Context(), rollout.Command{Shell: `read line; python3 -c "b = bytearray(1 << 30); print('allocated')"`,
		Timeout: 20 * time.Second})
	require.NoError(t, err)
	_, err = p.Stdin().Write([]byte("go\n"))
	require.NoError(t, err)
	require.NoError(t, p.Stdin().Close())
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	res, err := p.Wait()
	require.NoError(t, err)
	require.NotContains(t, string(out), "allocated")
	require.Equal(t, 128+9, res.ExitCode)
	require.Contains(t, string(res.Stderr), "memory limit of 268435456 bytes")

	p, err = sb.Start(t.Context(), rollout.Command{Shell: "bomb() { bomb | bomb & }; bomb; sleep 5", Timeout: 3 * time.Second})
	require.NoError(t, err)
	require.NoError(t, p.Stdin().Close())
	_, _ = io.Copy(io.Discard, p.Stdout())
	res, err = p.Wait()
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Contains(t, string(res.Stderr), "limit of 64 processes")
	stillWorks(t, f, sb)
}
