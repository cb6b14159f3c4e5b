// Package rollouttest checks implementations of [rollout.Sandbox] against the
// contract the agent loop and the built-in tools rely on.
//
// Two shapes, as with testing/fstest and testing/slogtest: [TestSandbox] returns every
// violation joined with errors.Join, and [Run] runs the same checks as subtests, each
// on a fresh sandbox.
//
//	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox { return newMySandbox(t) })
//
// The checks use /bin/sh, cat, echo, sleep and ln inside the sandbox; a sandbox whose
// image lacks them cannot be checked with this package.
package rollouttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// check is one named conformance check.
type check struct {
	name string
	fn   func(ctx context.Context, sb rollout.Sandbox) error
}

var checks = []check{
	{"files round trip", checkFiles},
	{"commands see files", checkCommandsSeeFiles},
	{"exit code, argv, stdin and dir", checkRun},
	{"timeout", checkTimeout},
	{"paths stay in the workspace", checkEscapes},
	{"Start streams, times out and kills (when implemented)", checkStart},
	{"close kills running commands", checkCloseKills},
	{"close is idempotent", checkClose},
}

// TestSandbox runs every check on sb, in order, and returns the violations joined
// with errors.Join (nil when there are none). The last check closes sb.
func TestSandbox(ctx context.Context, sb rollout.Sandbox) error {
	var errs []error
	for _, c := range checks {
		if err := c.fn(ctx, sb); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs every check as a subtest of t, each on a sandbox from newSandbox. Run
// closes each sandbox it is given.
func Run(t *testing.T, newSandbox func(t *testing.T) rollout.Sandbox) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			sb := newSandbox(t)
			defer sb.Close()
			if err := c.fn(t.Context(), sb); err != nil {
				t.Error(err)
			}
		})
	}
}

func checkFiles(_ context.Context, sb rollout.Sandbox) error {
	want := []byte("print('hi')\n")
	if err := sb.WriteFile("pkg/sub/a.py", want); err != nil {
		return fmt.Errorf("WriteFile with new parent directories: %w", err)
	}
	got, err := sb.ReadFile("pkg/sub/a.py")
	if err != nil {
		return fmt.Errorf("ReadFile: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("ReadFile = %q, want %q", got, want)
	}
	if err := sb.WriteFile("pkg/sub/a.py", []byte("x")); err != nil {
		return fmt.Errorf("WriteFile over an existing file: %w", err)
	}
	if got, _ := sb.ReadFile("pkg/sub/a.py"); string(got) != "x" {
		return fmt.Errorf("after overwrite ReadFile = %q, want %q", got, "x")
	}
	got, err = fs.ReadFile(sb.FS(), "pkg/sub/a.py")
	if err != nil || string(got) != "x" {
		return fmt.Errorf("fs.ReadFile(FS()) = %q, %v; want %q", got, err, "x")
	}
	entries, err := fs.ReadDir(sb.FS(), "pkg")
	if err != nil || len(entries) != 1 || entries[0].Name() != "sub" || !entries[0].IsDir() {
		return fmt.Errorf("fs.ReadDir(FS(), pkg) = %v, %v; want one directory sub", entries, err)
	}
	if _, err := sb.ReadFile("missing.txt"); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ReadFile of a missing file: %v, want an error matching fs.ErrNotExist", err)
	}
	return nil
}

func checkCommandsSeeFiles(ctx context.Context, sb rollout.Sandbox) error {
	if err := sb.WriteFile("in.txt", []byte("from the host\n")); err != nil {
		return err
	}
	res, err := sb.Run(ctx, rollout.Command{Shell: "cat in.txt; echo made by a command > out.txt"})
	if err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	if string(res.Stdout) != "from the host\n" || res.ExitCode != 0 {
		return fmt.Errorf("cat in.txt: stdout %q, exit %d; want %q, 0", res.Stdout, res.ExitCode, "from the host\n")
	}
	got, err := sb.ReadFile("out.txt")
	if err != nil || string(got) != "made by a command\n" {
		return fmt.Errorf("ReadFile of a file a command wrote = %q, %v", got, err)
	}
	return nil
}

func checkRun(ctx context.Context, sb rollout.Sandbox) error {
	var errs []error
	res, err := sb.Run(ctx, rollout.Command{Shell: "echo out; echo err >&2; exit 3"})
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("Run: %w", err))
	case res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n":
		errs = append(errs, fmt.Errorf("exit 3: got exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr))
	case res.TimedOut:
		errs = append(errs, errors.New("a command that exits is reported as timed out"))
	}
	res, err = sb.Run(ctx, rollout.Command{Argv: []string{"/bin/echo", "a b", "$HOME"}})
	if err != nil || string(res.Stdout) != "a b $HOME\n" {
		errs = append(errs, fmt.Errorf("Command.Argv runs without a shell: stdout %q, err %v", res.Stdout, err))
	}
	res, err = sb.Run(ctx, rollout.Command{Shell: "cat", Stdin: []byte("fed")})
	if err != nil || string(res.Stdout) != "fed" {
		errs = append(errs, fmt.Errorf("Command.Stdin: stdout %q, err %v", res.Stdout, err))
	}
	if err := sb.WriteFile("d/marker", []byte("here\n")); err != nil {
		errs = append(errs, err)
	}
	res, err = sb.Run(ctx, rollout.Command{Shell: "cat marker", Dir: "d"})
	if err != nil || string(res.Stdout) != "here\n" {
		errs = append(errs, fmt.Errorf("Command.Dir: stdout %q, stderr %q, err %v", res.Stdout, res.Stderr, err))
	}
	return errors.Join(errs...)
}

func checkTimeout(ctx context.Context, sb rollout.Sandbox) error {
	res, err := sb.Run(ctx, rollout.Command{Shell: "echo started; sleep 30", Timeout: 300 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	if !res.TimedOut || res.ExitCode != 124 {
		return fmt.Errorf("sleep 30 with a 300ms timeout: TimedOut %v, exit %d; want true, 124", res.TimedOut, res.ExitCode)
	}
	if res.Duration >= 30*time.Second {
		return fmt.Errorf("the command ran for %s: the timeout did not kill it", res.Duration)
	}
	return nil
}

func checkEscapes(ctx context.Context, sb rollout.Sandbox) error {
	var errs []error
	for _, p := range []string{"../outside.txt", "/tmp/outside.txt", "a/../../outside.txt"} {
		if err := sb.WriteFile(p, []byte("x")); err == nil {
			errs = append(errs, fmt.Errorf("WriteFile(%q) succeeded", p))
		}
		if _, err := sb.ReadFile(p); err == nil {
			errs = append(errs, fmt.Errorf("ReadFile(%q) succeeded", p))
		}
	}
	res, err := sb.Run(ctx, rollout.Command{Shell: "ln -s / root_link && ln -s /etc/passwd passwd_link"})
	if err != nil || res.ExitCode != 0 {
		return errors.Join(append(errs, fmt.Errorf("making symlinks: exit %d, stderr %q, err %v", res.ExitCode, res.Stderr, err))...)
	}
	if _, err := sb.ReadFile("passwd_link"); err == nil {
		errs = append(errs, errors.New("ReadFile followed a symlink out of the workspace"))
	}
	if _, err := sb.ReadFile("root_link/etc/hostname"); err == nil {
		errs = append(errs, errors.New("ReadFile followed a directory symlink out of the workspace"))
	}
	if err := sb.WriteFile("root_link/tmp/rollouttest-escape", []byte("x")); err == nil {
		errs = append(errs, errors.New("WriteFile followed a directory symlink out of the workspace"))
	}
	if _, err := fs.ReadFile(sb.FS(), "passwd_link"); err == nil {
		errs = append(errs, errors.New("FS() followed a symlink out of the workspace"))
	}
	return errors.Join(errs...)
}

// closeWait bounds how long a Run may go on after Close; the command would run for
// far longer on its own.
const closeWait = 10 * time.Second

func checkCloseKills(ctx context.Context, sb rollout.Sandbox) error {
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(ctx, rollout.Command{Shell: "echo up > started.txt; sleep 120", Timeout: 5 * time.Minute})
		done <- err
	}()
	for deadline := time.Now().Add(closeWait); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := sb.ReadFile("started.txt"); string(b) == "up\n" {
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("the command ended before Close (%v)", err)
		default:
		}
		if time.Now().After(deadline) {
			_ = sb.Close()
			return fmt.Errorf("the command did not start within %s", closeWait)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- sb.Close() }()
	select {
	case <-done:
	case <-time.After(closeWait):
		return fmt.Errorf("Run still running %s after Close: Close must kill running commands", closeWait)
	}
	select {
	case err := <-closed:
		if err != nil {
			return fmt.Errorf("Sandbox.Close: %w", err)
		}
	case <-time.After(closeWait):
		return fmt.Errorf("Sandbox.Close did not return within %s", closeWait)
	}
	if _, err := sb.Run(ctx, rollout.Command{Shell: "true"}); err == nil {
		return errors.New("Run after Close succeeded")
	}
	return nil
}

func checkClose(_ context.Context, sb rollout.Sandbox) error {
	if err := sb.Close(); err != nil {
		return fmt.Errorf("first Close: %w", err)
	}
	if err := sb.Close(); err != nil {
		return fmt.Errorf("second Close: %w", err)
	}
	return nil
}
