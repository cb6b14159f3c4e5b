package bwrap_test

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func TestCloseKillsEverythingAndRemovesWorkspace(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sbi, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	sb := sbi.(*bwrap.Sandbox)
	host := sb.HostDir()
	require.NoError(t, sb.WriteFile("a/b.txt", []byte("x")))
	m := marker()

	errc := make(chan error, 1)
	go func() {
		_, err := sb.Run(t.Context(), rollout.Command{Shell: "setsid sleep " + m + " & sleep " + m, Timeout: time.Minute})
		errc <- err
	}()
	waitForSleep(t, m)
	require.NoError(t, sb.Close())
	require.ErrorIs(t, <-errc, bwrap.ErrClosed)
	require.Empty(t, hostProcs(t, "sleep", m), "processes left after Close")
	_, err = os.Lstat(host)
	require.ErrorIs(t, err, fs.ErrNotExist, "workspace not removed")
	_, err = os.Lstat(filepath.Dir(host))
	require.ErrorIs(t, err, fs.ErrNotExist, "sandbox directory not removed")

	require.NoError(t, sb.Close(), "Close is idempotent")
	_, err = sb.Run(t.Context(), rollout.Command{Shell: "true"})
	require.ErrorIs(t, err, bwrap.ErrClosed)
	_, err = sb.Run(t.Context(), rollout.Command{Shell: "true", Dir: "a"})
	require.ErrorIs(t, err, bwrap.ErrClosed)
	_, err = sb.ReadFile("a/b.txt")
	require.Error(t, err)
	require.Error(t, sb.WriteFile("c", nil))
}

func TestFileToolsRefuseNamesOutsideWorkspace(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	for _, name := range []string{"", "/etc/passwd", "../x", "a/../../x", "/workspace/x"} {
		require.ErrorIs(t, sb.WriteFile(name, []byte("x")), fs.ErrInvalid, "WriteFile(%q)", name)
		_, err := sb.ReadFile(name)
		require.ErrorIs(t, err, fs.ErrInvalid, "ReadFile(%q)", name)
	}
	_, err := sb.ReadFile("missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	// A name with ".." that stays inside is fine.
	require.NoError(t, sb.WriteFile("a/../b.txt", []byte("b")))
	got, err := sb.ReadFile("b.txt")
	require.NoError(t, err)
	require.Equal(t, "b", string(got))
}

func TestFSConformance(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	require.NoError(t, sb.WriteFile("solution.py", []byte("x = 1\n")))
	require.NoError(t, sb.WriteFile("tests/test_a.py", []byte("assert True\n")))
	res := run(t, sb, "mkdir -p deep/er && echo made > deep/er/c.txt", 0)
	require.Equal(t, 0, res.ExitCode)

	require.NoError(t, fstest.TestFS(sb.FS(), "solution.py", "tests/test_a.py", "deep/er/c.txt"))
	var files []string
	require.NoError(t, fs.WalkDir(sb.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}))
	require.Equal(t, "deep/er/c.txt solution.py tests/test_a.py", strings.Join(files, " "))
}

func TestProbeErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-bwrap")
	_, err := bwrap.New(t.Context(), bwrap.Config{BwrapPath: missing})
	require.ErrorIs(t, err, bwrap.ErrBwrapNotFound)
	var pe *bwrap.ProbeError
	require.ErrorAs(t, err, &pe)
	for _, want := range []string{missing, "apt-get install", "bubblewrap", "Config.Unconfined"} {
		require.Contains(t, err.Error(), want)
	}

	// A bwrap that fails the way it does when the kernel refuses user namespaces.
	dir := reachableTempDir(t)
	fake := filepath.Join(dir, "bwrap")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"+
		"echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\n"+
		"exit 1\n"), 0o755))
	_, err = bwrap.New(t.Context(), bwrap.Config{BwrapPath: fake})
	require.ErrorIs(t, err, bwrap.ErrNamespacesDenied)
	require.Contains(t, err.Error(), "user namespaces")
	require.Contains(t, err.Error(), "Config.Unconfined")

	_, err = bwrap.New(t.Context(), bwrap.Config{Python: "/nonexistent/python3"})
	require.ErrorIs(t, err, bwrap.ErrProbeFailed)
	require.Contains(t, err.Error(), "/nonexistent/python3")

	_, err = bwrap.New(t.Context(), bwrap.Config{BaseDir: filepath.Join(t.TempDir(), "missing")})
	require.ErrorIs(t, err, bwrap.ErrProbeFailed)

	// An interpreter directly in /tmp would need the host's /tmp bound in: refused.
	top := "/tmp/agenticopd-python3-" + marker()
	require.NoError(t, os.Symlink("/usr/bin/python3", top))
	t.Cleanup(func() { os.Remove(top) })
	_, err = bwrap.New(t.Context(), bwrap.Config{Python: top})
	require.ErrorIs(t, err, bwrap.ErrProbeFailed)
	require.Contains(t, err.Error(), "directory of its own")
}

func TestInterpreterOutsideUsr(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the unreachable-interpreter case needs a root process dropping to another uid")
	}
	// A 0700 directory (like a pyenv install under root's home) is out of the
	// sandbox uid's reach: the probe says so instead of running another interpreter.
	hidden := t.TempDir()
	require.NoError(t, os.Chmod(hidden, 0o700))
	require.NoError(t, os.Symlink("/usr/bin/python3", filepath.Join(hidden, "python3")))
	_, err := bwrap.New(t.Context(), bwrap.Config{Python: filepath.Join(hidden, "python3")})
	require.ErrorIs(t, err, bwrap.ErrProbeFailed)
	require.Contains(t, err.Error(), "reachable by host uid")

	// Made reachable, its directory is bound read-only and it is what "python" runs.
	dir := reachableTempDir(t)
	py := filepath.Join(dir, "python3")
	require.NoError(t, os.Symlink("/usr/bin/python3", py))
	f := newFactory(t, bwrap.Config{Python: py})
	require.Contains(t, f.Enforcement().HostPathVisible, "Config.Python lies outside /usr", "its host path shows inside")
	sb := newSandbox(t, f)
	res := run(t, sb, `readlink /run/sandbox/bin/python; python -c 'print("ok")'; touch `+dir+`/x`, 0)
	require.Equal(t, py+"\nok\n", string(res.Stdout))
	require.Contains(t, string(res.Stderr), "Read-only file system")
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	cases := map[string]bwrap.Config{
		"negative timeout":     {Timeout: -time.Second},
		"timeout over max":     {Timeout: time.Hour, MaxTimeout: time.Minute},
		"output over kill cap": {OutputLimit: 2 << 20, KillOutputLimit: 1 << 20},
		"relative python":      {Python: "python3"},
		"relative bwrap":       {BwrapPath: "bwrap"},
		"negative uid":         {UID: -1},
		"tiny memory":          {Limits: bwrap.Limits{Memory: 1 << 20}},
		"relative cgroup":      {CgroupParent: "agenticopd"},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := bwrap.New(t.Context(), cfg)
			require.ErrorIs(t, err, bwrap.ErrInvalidConfig)
		})
	}
}

// reachableTempDir is a temporary directory the sandbox uid can traverse.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return dir
}

// helperEnv makes the test binary act as a library process that is killed mid-run.
const helperEnv = "AGENTICOPD_SANDBOX_TEST_HELPER"

func TestLibraryProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	if os.Getenv(helperEnv) != "" {
		return // the helper itself runs in TestHelperLibraryProcess
	}
	base := reachableTempDir(t)
	m := marker()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLibraryProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+base+":"+m)
	require.NoError(t, cmd.Start())
	waitForSleep(t, m+"2")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	// Pdeathsig on bwrap and --die-with-parent take the sandbox down with the
	// library process; the kernel does it asynchronously, so allow it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for len(hostProcs(t, "sleep", m)) > 0 {
		require.True(t, time.Now().Before(deadline), "sandbox processes outlived the library process")
		time.Sleep(10 * time.Millisecond)
	}

	// Its sandbox stayed behind (a tmpfs workspace stays mounted, its cgroups
	// stay); the next New on the same base directory removes it.
	left, err := filepath.Glob(filepath.Join(base, "agenticopd-sandbox-*"))
	require.NoError(t, err)
	require.Len(t, left, 1)
	stale := filepath.Base(left[0])
	cgroups := sandboxCgroupDirs(t, stale)
	f := newFactory(t, bwrap.Config{BaseDir: base})
	left, err = filepath.Glob(filepath.Join(base, "agenticopd-sandbox-*"))
	require.NoError(t, err)
	require.Empty(t, left, "a sandbox of a dead process was left in the base directory")
	// Its cgroups too (the helper ran in this process's cgroup).
	require.Len(t, cgroups, len(f.Enforcement().CgroupDirs))
	for _, dir := range cgroups {
		_, err := os.Stat(dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the dead sandbox's cgroup %s", dir)
	}
}

// sandboxCgroupDirs lists the cgroups of the sandbox whose directory is named name,
// as this process's factories would make them (none without a cgroup).
func sandboxCgroupDirs(t *testing.T, name string) []string {
	t.Helper()
	var dirs []string
	for _, parent := range newFactory(t, bwrap.Config{BaseDir: t.TempDir()}).Enforcement().CgroupDirs {
		dir := filepath.Join(parent, name)
		require.DirExists(t, dir, "the dead sandbox's cgroup")
		dirs = append(dirs, dir)
	}
	return dirs
}

// TestHelperLibraryProcess is the process TestLibraryProcessKilledMidRun kills.
func TestHelperLibraryProcess(t *testing.T) {
	env := os.Getenv(helperEnv)
	if env == "" {
		t.Skip("helper process for TestLibraryProcessKilledMidRun")
	}
	base, m, _ := strings.Cut(env, ":")
	f := newFactory(t, bwrap.Config{BaseDir: base})
	sb := newSandbox(t, f)
	_, _ = sb.Run(t.Context(), rollout.Command{
		Shell:   "sleep " + m + "1 & setsid sleep " + m + "2 & sleep " + m + "3",
		Timeout: time.Minute,
	})
	t.Error("the helper should have been killed")
}

func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFactory(t, bwrap.Config{Logger: logger})
	require.Contains(t, buf.String(), "sandbox: ready")
	sb := newSandbox(t, f)
	res := run(t, sb, "sleep 5", 100*time.Millisecond)
	require.True(t, res.TimedOut)
	require.Contains(t, buf.String(), "reason=timeout")
}
