package bwrap_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newFactory builds a factory for the tests. The probe must pass: CI installs
// bubblewrap, so a failing probe is a failing test, not a skip.
func newFactory(t testing.TB, cfg bwrap.Config) *bwrap.Factory {
	t.Helper()
	f, err := bwrap.New(t.Context(), cfg)
	require.NoError(t, err, "sandbox probe")
	return f
}

// newSandbox makes a sandbox closed at the end of the test.
func newSandbox(t testing.TB, f *bwrap.Factory) *bwrap.Sandbox {
	t.Helper()
	sb, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sb.Close()) })
	return sb.(*bwrap.Sandbox)
}

// run runs a shell command and requires that the sandbox itself did not fail.
func run(t *testing.T, sb rollout.Sandbox, shell string, timeout time.Duration) rollout.CommandResult {
	t.Helper()
	res, err := sb.Run(t.Context(), rollout.Command{Shell: shell, Timeout: timeout})
	require.NoError(t, err, "run %q", shell)
	return res
}

func commandShell(shell string) rollout.Command { return rollout.Command{Shell: shell} }

// marker returns a sleep duration no other process on the host uses, so leftovers
// can be found by their command line.
func marker() string { return strconv.Itoa(900000 + rand.IntN(99999)) }

// hostProcs lists the host pids of live (non-zombie) processes whose command line
// contains every one of words. Leftover checks use it with a marker, so a bwrap or
// shell whose arguments carry the marker counts as a leftover too.
func hostProcs(t *testing.T, words ...string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		line := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitForSleep waits until a process "sleep arg" runs on the host, proving that a
// command really started it.
func waitForSleep(t *testing.T, arg string) {
	t.Helper()
	want := "sleep\x00" + arg + "\x00"
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir("/proc")
		require.NoError(t, err)
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "no process %q appeared on the host", want)
		time.Sleep(10 * time.Millisecond)
	}
}

// sandboxHostUID is the host uid the sandboxed code should run as.
func sandboxHostUID() int {
	if os.Geteuid() == 0 {
		return bwrap.DefaultUID
	}
	return os.Geteuid()
}

func TestRunPythonWritesFileSeenByReadFile(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)

	res := run(t, sb, `python3 -c "open('out.txt','w').write('hello from python')"`, 0)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.False(t, res.Unconfined)
	got, err := sb.ReadFile("out.txt")
	require.NoError(t, err)
	require.Equal(t, "hello from python", string(got))

	// "python" (as the reference environment runs tests) is the configured interpreter.
	res = run(t, sb, `python -c "import sys; print(sys.executable, sys.version_info[0])"`, 0)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "/run/sandbox/bin/python 3\n", string(res.Stdout))
}

func TestWriteFileIsUsableBySandboxedCode(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)

	require.NoError(t, sb.WriteFile("pkg/sub/solution.py", []byte("def f():\n    return 41\n")))
	res := run(t, sb, `cd pkg/sub && python3 -c "
import solution
open('solution.py','a').write('def g():\n    return solution.f() + 1\n')
open('new.txt','w').write('made inside')
"`, 0)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)

	got, err := sb.ReadFile("pkg/sub/solution.py")
	require.NoError(t, err)
	require.Contains(t, string(got), "def g():")
	got, err = sb.ReadFile("pkg/sub/new.txt")
	require.NoError(t, err)
	require.Equal(t, "made inside", string(got))

	for _, name := range []string{"pkg", "pkg/sub", "pkg/sub/solution.py"} {
		fi, err := os.Lstat(filepath.Join(sb.HostDir(), name))
		require.NoError(t, err)
		require.Equal(t, sandboxHostUID(), hostUID(fi), name)
	}
}

func TestStdinDirAndEnvironment(t *testing.T) {
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	require.NoError(t, sb.WriteFile("sub/keep", nil))

	res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"cat"}, Stdin: []byte("from stdin")})
	require.NoError(t, err)
	require.Equal(t, "from stdin", string(res.Stdout))

	res, err = sb.Run(t.Context(), rollout.Command{Shell: "pwd; echo $HOME", Dir: "sub"})
	require.NoError(t, err)
	require.Equal(t, "/workspace/sub\n/workspace\n", string(res.Stdout))
	require.Equal(t, "/workspace", sb.Dir())

	// The host environment does not leak in.
	t.Setenv("AGENTICOPD_SECRET_FOR_TEST", "leak")
	res = run(t, sb, "env", 0)
	require.NotContains(t, string(res.Stdout), "AGENTICOPD_SECRET_FOR_TEST")
	require.Contains(t, string(res.Stdout), "PYTHONDONTWRITEBYTECODE=1")

	res = run(t, sb, "exit 3", 0)
	require.Equal(t, 3, res.ExitCode)
	res = run(t, sb, "kill -SEGV $$", 0)
	require.Equal(t, 128+11, res.ExitCode)
}

func TestInvalidCommands(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	require.NoError(t, sb.WriteFile("file", []byte("x")))

	cases := map[string]rollout.Command{
		"empty":            {},
		"blank shell":      {Shell: "  "},
		"empty argv0":      {Argv: []string{""}},
		"dir escapes":      {Shell: "true", Dir: "../x"},
		"dir absolute":     {Shell: "true", Dir: "/etc"},
		"dir missing":      {Shell: "true", Dir: "nope"},
		"dir is a file":    {Shell: "true", Dir: "file"},
		"negative timeout": {Shell: "true", Timeout: -time.Second},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := sb.Run(t.Context(), c)
			require.ErrorIs(t, err, bwrap.ErrInvalidCommand)
		})
	}
}

func TestBwrapSetupFailureIsAnError(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	// Without its workspace bwrap cannot set up the sandbox; the command never runs.
	// (A tmpfs workspace is unmounted first.)
	if f.Enforcement().Storage == bwrap.StorageTmpfs {
		require.NoError(t, syscall.Unmount(sb.HostDir(), syscall.MNT_DETACH))
	}
	require.NoError(t, os.RemoveAll(sb.HostDir()))
	res, err := sb.Run(t.Context(), rollout.Command{Shell: "echo ran"})
	require.ErrorIs(t, err, bwrap.ErrStart)
	require.Contains(t, err.Error(), "workspace")
	require.Empty(t, res.Stdout)
}

func TestContextEndKillsCommand(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	sb := newSandbox(t, f)
	m := marker()

	ctx, cancel := context.WithCancel(t.Context())
	type out struct {
		res rollout.CommandResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := sb.Run(ctx, rollout.Command{Shell: "setsid sleep " + m + " & sleep " + m + "; true", Timeout: time.Minute})
		ch <- out{res, err}
	}()
	waitForSleep(t, m)
	cancel()
	o := <-ch
	require.ErrorIs(t, o.err, context.Canceled)
	require.False(t, o.res.TimedOut)
	require.Empty(t, hostProcs(t, "sleep", m))

	_, err := sb.Run(ctx, rollout.Command{Shell: "true"})
	require.ErrorIs(t, err, context.Canceled, "a done ctx runs nothing")
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	f := newFactory(t, bwrap.Config{})
	a, b := newSandbox(t, f), newSandbox(t, f)
	errc := make(chan error, 8)
	for i := range 8 {
		sb := a
		if i%2 == 1 {
			sb = b
		}
		go func() {
			name := fmt.Sprintf("f%d", i)
			res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"sh", "-c", "echo $0 > $0; cat $0", name}})
			if err == nil && string(res.Stdout) != name+"\n" {
				err = fmt.Errorf("run %d: stdout %q", i, res.Stdout)
			}
			errc <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-errc)
	}
	for i := range 8 {
		sb, other := a, b
		if i%2 == 1 {
			sb, other = b, a
		}
		_, err := sb.ReadFile(fmt.Sprintf("f%d", i))
		require.NoError(t, err)
		_, err = other.ReadFile(fmt.Sprintf("f%d", i))
		require.ErrorIs(t, err, os.ErrNotExist, "workspaces are separate")
	}
}

func hostUID(fi os.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Uid) }
