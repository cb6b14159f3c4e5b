package podproto_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

func TestRun(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "marker"), []byte("here\n"), 0o644))
	ctx := context.Background()
	tests := []struct {
		name           string
		cmd            rollout.Command
		exit           int
		stdout, stderr string
	}{
		{"exit code and streams", rollout.Command{Shell: "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"argv without a shell", rollout.Command{Argv: []string{"/bin/echo", "a b", "$HOME"}}, 0, "a b $HOME\n", ""},
		{"argv from PATH", rollout.Command{Argv: []string{"echo", "x"}}, 0, "x\n", ""},
		{"stdin", rollout.Command{Shell: "cat", Stdin: []byte("fed")}, 0, "fed", ""},
		{"stdin ends", rollout.Command{Shell: "cat; echo done"}, 0, "done\n", ""},
		{"dir", rollout.Command{Shell: "cat marker", Dir: "d"}, 0, "here\n", ""},
		{"signal", rollout.Command{Shell: "kill -9 $$"}, 137, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Run(ctx, tt.cmd)
			require.NoError(t, err)
			require.Equal(t, tt.exit, res.ExitCode)
			require.Equal(t, tt.stdout, string(res.Stdout))
			require.Equal(t, tt.stderr, string(res.Stderr))
			require.False(t, res.TimedOut)
		})
	}
}

func TestRunRefusals(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{})
	require.NoError(t, os.Symlink("/", filepath.Join(root, "out")))
	ctx := context.Background()
	for _, cmd := range []rollout.Command{{}, {Shell: "true", Dir: "../x"}, {Shell: "true", Timeout: -1}} {
		_, err := c.Run(ctx, cmd)
		require.ErrorIs(t, err, podproto.ErrInvalidCommand, "%+v", cmd)
	}
	_, err := c.Run(ctx, rollout.Command{Shell: "true", Dir: "missing"})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = c.Run(ctx, rollout.Command{Shell: "true", Dir: "out/tmp"})
	require.Error(t, err, "a working directory through a symlink out of the workspace")
	_, err = c.Run(ctx, rollout.Command{Argv: []string{"no-such-program"}})
	require.ErrorIs(t, err, podproto.ErrStart)
}

func TestRunOutputCaps(t *testing.T) {
	c, _, _ := newClient(t, podproto.Config{OutputLimit: 1000, KillOutputLimit: 1 << 20})
	ctx := context.Background()
	res, err := c.Run(ctx, rollout.Command{Shell: "head -c 100000 /dev/zero | tr '\\0' a; echo; echo last"})
	require.NoError(t, err)
	require.True(t, res.OutputTruncated)
	require.False(t, res.OutputKilled)
	require.Contains(t, string(res.Stdout), "bytes cut]")
	require.True(t, strings.HasSuffix(string(res.Stdout), "\nlast\n"), "the tail is kept")
	require.Less(t, len(res.Stdout), 1100)

	res, err = c.Run(ctx, rollout.Command{Shell: "yes", Timeout: 10 * time.Minute})
	require.NoError(t, err)
	require.True(t, res.OutputKilled, "past the hard cap the command is killed")
	require.Equal(t, 128+9, res.ExitCode)
}

func TestRunTimeout(t *testing.T) {
	c, _, _ := newClient(t, podproto.Config{})
	res, err := c.Run(context.Background(), rollout.Command{Shell: "echo started; sleep 30", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)
	require.Equal(t, "started\n", string(res.Stdout))
}

// waitGone waits for pid to be gone or a zombie; the bound is far above what a
// kill takes and only stops a broken test.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
	}
}

// waitFile waits for a file a command writes.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(p); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", p)
		}
	}
}

// runTree runs, under ctx, a command that starts a setsid'd grandchild and waits; it
// returns the grandchild's pid once it is written, and the channel of Run's error.
func runTree(t *testing.T, ctx context.Context, c *podproto.Client, root string) (int, <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, rollout.Command{Timeout: 10 * time.Minute,
			Shell: "setsid sh -c 'echo $$ > gc.pid; exec sleep 1000' & sleep 1000"})
		done <- err
	}()
	pid, err := strconv.Atoi(waitFile(t, filepath.Join(root, "gc.pid")))
	require.NoError(t, err)
	return pid, done
}

// A cancelled ctx kills the command's whole tree in the pod, a setsid'd grandchild
// included: through the kill op alone when the exec cannot close stdin (v4), and
// through the client's lost stream too otherwise.
func TestCancelKillsTree(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run("keepStdin="+strconv.FormatBool(keep), func(t *testing.T) {
			c, e, root := newClient(t, podproto.Config{})
			e.keepStdin = keep
			ctx, cancel := context.WithCancel(context.Background())
			pid, done := runTree(t, ctx, c, root)
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			waitGone(t, pid)
			require.GreaterOrEqual(t, e.count(podproto.OpKill), 1)
		})
	}
}

// lateAfterFuncs is a context that is done (Done closed, Err set) before the funcs
// given to context.AfterFunc start: what every cancelled context is for a moment,
// held here for as long as the test needs.
type lateAfterFuncs struct {
	context.Context // Background's values and no deadline
	done            chan struct{}

	mu    sync.Mutex
	err   error
	funcs map[int]func()
	next  int
}

func newLateAfterFuncs() *lateAfterFuncs {
	return &lateAfterFuncs{Context: context.Background(), done: make(chan struct{}), funcs: map[int]func(){}}
}

func (c *lateAfterFuncs) Done() <-chan struct{} { return c.done }

func (c *lateAfterFuncs) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is what context.AfterFunc uses on a parent that has it.
func (c *lateAfterFuncs) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.funcs[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[id]
		delete(c.funcs, id)
		return ok
	}
}

// cancel makes the context done without starting its after-funcs.
func (c *lateAfterFuncs) cancel() {
	c.mu.Lock()
	c.err = context.Canceled
	c.mu.Unlock()
	close(c.done)
}

// runAfterFuncs starts the after-funcs not stopped yet.
func (c *lateAfterFuncs) runAfterFuncs() {
	c.mu.Lock()
	fs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}

// A run whose call ends on its context's Done before the context's after-funcs
// start is killed all the same: without the kill op, an exec that cannot close
// stdin (v4) would leave it running in the pod until its timeout.
func TestCancelKillsTreeBeforeAfterFuncsRun(t *testing.T) {
	c, e, root := newClient(t, podproto.Config{})
	e.keepStdin = true
	ctx := newLateAfterFuncs()
	t.Cleanup(ctx.runAfterFuncs)
	pid, done := runTree(t, ctx, c, root)
	ctx.cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, 1, e.count(podproto.OpKill), "Run returned after its kill")
	waitGone(t, pid)
}

func TestStartKillKillsTree(t *testing.T) {
	c, e, root := newClient(t, podproto.Config{})
	e.keepStdin = true
	p, err := c.Start(context.Background(), rollout.Command{Timeout: 10 * time.Minute,
		Shell: "setsid sh -c 'echo $$ > gc.pid; exec sleep 1000' & echo started; sleep 1000"})
	require.NoError(t, err)
	pid, err := strconv.Atoi(waitFile(t, filepath.Join(root, "gc.pid")))
	require.NoError(t, err)
	p.Kill()
	p.Kill()
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	require.Equal(t, "started\n", string(out))
	res, err := p.Wait()
	require.NoError(t, err)
	require.Equal(t, 137, res.ExitCode)
	waitGone(t, pid)
}

// An exec that ends without a result frame is an error, never a result.
func TestNoResult(t *testing.T) {
	c, e, root := newClient(t, podproto.Config{})
	done := make(chan error, 1)
	go func() {
		// exec: the sleep is the helper's child and dies with it (Pdeathsig).
		_, err := c.Run(context.Background(), rollout.Command{Shell: "echo up > up; exec sleep 1000", Timeout: 10 * time.Minute})
		done <- err
	}()
	waitFile(t, filepath.Join(root, "up"))
	pid := e.lastPID()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL)) // the container was OOM-killed
	err := <-done
	require.ErrorIs(t, err, podproto.ErrNoResult)

	for name, out := range map[string][]byte{
		"nothing":       nil,
		"cut frame":     {podproto.FrameStdout, 0, 0, 0, 9, 'a'},
		"unknown kind":  {'z', 0, 0, 0, 0},
		"huge frame":    {podproto.FrameStdout, 0xff, 0xff, 0xff, 0xff},
		"bad result":    {podproto.FrameResult, 0, 0, 0, 1, '{'},
		"after result":  append([]byte{podproto.FrameResult, 0, 0, 0, 2, '{', '}'}, podproto.FrameStdout, 0, 0, 0, 0),
		"stdin to host": {podproto.FrameStdin, 0, 0, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			fake := podproto.ExecFunc(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
				_, err := stdout.Write(out)
				return err
			})
			c, err := podproto.NewClient(fake, podproto.Config{})
			require.NoError(t, err)
			_, err = c.Run(context.Background(), rollout.Command{Shell: "true"})
			require.ErrorIs(t, err, podproto.ErrNoResult)
		})
	}
}

func TestFiles(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{MaxReadFile: 1000})
	ctx := context.Background()
	require.NoError(t, c.WriteFile(ctx, "pkg/sub/a.py", []byte("print(1)\n")))
	got, err := c.ReadFile(ctx, "pkg/sub/a.py")
	require.NoError(t, err)
	require.Equal(t, "print(1)\n", string(got))
	require.NoError(t, c.WriteFile(ctx, "pkg/sub/a.py", []byte("x")))
	got, err = fs.ReadFile(c.FS(), "pkg/sub/a.py")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	entries, err := fs.ReadDir(c.FS(), "pkg")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.True(t, entries[0].IsDir())
	fi, err := fs.Stat(c.FS(), "pkg/sub/a.py")
	require.NoError(t, err)
	require.Equal(t, int64(1), fi.Size())

	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "passwd_link")))
	require.NoError(t, os.Symlink("/", filepath.Join(root, "root_link")))
	require.NoError(t, os.Symlink("pkg/sub/a.py", filepath.Join(root, "inside_link")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "big"), make([]byte, 2000), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "linked"), []byte("l"), 0o644))
	require.NoError(t, os.Link(filepath.Join(root, "linked"), filepath.Join(root, "linked2")))

	got, err = c.ReadFile(ctx, "inside_link")
	require.NoError(t, err, "a symlink inside the workspace is followed")
	require.Equal(t, "x", string(got))
	refusals := []struct {
		name string
		err  error
		fn   func() error
	}{
		{"missing", fs.ErrNotExist, func() error { _, err := c.ReadFile(ctx, "missing.txt"); return err }},
		{"dotdot", fs.ErrInvalid, func() error { _, err := c.ReadFile(ctx, "../x"); return err }},
		{"absolute", fs.ErrInvalid, func() error { return c.WriteFile(ctx, "/tmp/x", nil) }},
		{"symlink out", fs.ErrInvalid, func() error { _, err := c.ReadFile(ctx, "passwd_link"); return err }},
		{"dir symlink out", fs.ErrInvalid, func() error { _, err := c.ReadFile(ctx, "root_link/etc/hostname"); return err }},
		{"write through symlink", fs.ErrInvalid, func() error { return c.WriteFile(ctx, "root_link/tmp/escape", []byte("x")) }},
		{"FS symlink out", fs.ErrInvalid, func() error { _, err := fs.ReadFile(c.FS(), "passwd_link"); return err }},
		{"fifo", podproto.ErrNotRegular, func() error { _, err := c.ReadFile(ctx, "fifo"); return err }},
		{"FS fifo", podproto.ErrNotRegular, func() error { _, err := c.FS().Open("fifo"); return err }},
		{"directory", podproto.ErrNotRegular, func() error { _, err := c.ReadFile(ctx, "pkg"); return err }},
		{"too large", podproto.ErrTooLarge, func() error { _, err := c.ReadFile(ctx, "big"); return err }},
		{"write too large", podproto.ErrTooLarge, func() error { return c.WriteFile(ctx, "w", make([]byte, 2000)) }},
		{"hard linked", podproto.ErrHardLinked, func() error { return c.WriteFile(ctx, "linked", []byte("y")) }},
		{"readdir of a file", podproto.ErrNotDir, func() error { _, err := c.ReadDir(ctx, "big"); return err }},
	}
	for _, r := range refusals {
		err := r.fn()
		require.ErrorIs(t, err, r.err, "%s: %v", r.name, err)
	}
	_, err = os.Stat("/tmp/escape")
	require.True(t, errors.Is(err, fs.ErrNotExist) || err == nil)
}

// The FS reads a file larger than one chunk in chunks.
func TestFSChunks(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{})
	want := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16+3)
	require.NoError(t, os.WriteFile(filepath.Join(root, "large"), want, 0o644))
	got, err := io.ReadAll(must(c.FS().Open("large")))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

func must(f fs.File, err error) fs.File {
	if err != nil {
		panic(err)
	}
	return f
}

func TestRestore(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{})
	ctx := context.Background()
	res, err := c.Run(ctx, rollout.Command{Shell: "mkdir -p a/b/c && echo x > a/b/c/f && ln -s /etc a/etc && " +
		"chmod 000 a/b/c/f && chmod 000 a/b/c a/b && chmod 000 a && chmod 000 ."})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	require.NoError(t, c.Restore(ctx))
	for p, want := range map[string]os.FileMode{".": 0o700, "a": 0o700, "a/b": 0o700, "a/b/c": 0o700, "a/b/c/f": 0o600} {
		fi, err := os.Lstat(filepath.Join(root, p))
		require.NoError(t, err)
		require.Equal(t, want, fi.Mode().Perm(), p)
	}
	fi, err := os.Stat("/etc")
	require.NoError(t, err)
	require.NotEqual(t, os.FileMode(0o700), fi.Mode().Perm(), "a symlink is not followed")
}

// Restore of a chain of 10,000 mode-000 directories ends (the walk is linear in
// depth; BenchmarkRestoreDeepChain measures 100,000).
func TestRestoreDeepChain(t *testing.T) {
	c, _, root := newClient(t, podproto.Config{})
	makeChain(t, root, 10000)
	require.NoError(t, c.Restore(context.Background()))
	n := checkChain(t, root)
	require.Equal(t, 10000, n)
}
