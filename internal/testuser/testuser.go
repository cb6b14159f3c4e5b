// Package testuser runs a test again as another user: the test binary is copied
// where that user can run it and re-executed with only the calling test selected,
// as uid and gid [UID] (1000, an ordinary user) with a directory of its own. The
// re-executed test finds that directory with [Dir] and does the work; the calling
// test (as root) checks that it passed. With Options.LimitUserNamespaces the user
// can make at most Options.UserNamespaces user namespaces, nested ones included, as
// on a host with user.max_user_namespaces set so (0: none at all): the test binary
// starts in a user namespace of its own (uids 0 and UID mapped to themselves) whose
// limit is set before it drops to UID.
//
// The tests of the library run as root (CI does); a test that calls [Run] as another
// user fails, never skips.
package testuser

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// UID and GID are the ids the test runs as: an ordinary user's.
const (
	UID = 1000
	GID = 1000
)

// dirEnv names, in the re-executed test binary, the directory it works in.
const dirEnv = "AGENTICOPD_TESTUSER_DIR"

// Options says how the test runs again.
type Options struct {
	// Env is added to the re-executed test's environment ("K=V").
	Env []string
	// LimitUserNamespaces runs it where at most UserNamespaces user namespaces can
	// be made at once.
	LimitUserNamespaces bool
	UserNamespaces      int
}

// Dir reports whether this is the re-executed test, and the directory (owned by
// [UID]) it may write in.
func Dir() (string, bool) {
	d := os.Getenv(dirEnv)
	return d, d != ""
}

// Run re-executes the calling top-level test as [UID] and fails t when it fails or
// does not run. It returns the test's output.
func Run(t *testing.T, opts Options) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("testuser: running a test as uid %d needs root (the library's tests run as root)", UID)
	}
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("testuser: %s: only a top-level test can run again", t.Name())
	}
	dir := reachableDir(t)
	bin := filepath.Join(dir, "test.bin")
	if err := copyExecutable(bin); err != nil {
		t.Fatalf("testuser: copying the test binary: %v", err)
	}
	work := filepath.Join(dir, "work")
	tmp := filepath.Join(work, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, UID, GID); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	if opts.LimitUserNamespaces {
		// sh runs as root of a user namespace of its own, sets that namespace's limit
		// of user namespaces, and becomes UID.
		cmd = exec.CommandContext(t.Context(), "/bin/sh", append([]string{"-c",
			`echo ` + strconv.Itoa(opts.UserNamespaces) + ` > /proc/sys/user/max_user_namespaces && exec /usr/bin/setpriv --reuid=` + strconv.Itoa(UID) +
				` --regid=` + strconv.Itoa(GID) + ` --clear-groups -- "$0" "$@"`, bin}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: UID, HostID: UID, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: GID, HostID: GID, Size: 1}},
			GidMappingsEnableSetgroups: true,
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: GID, Groups: []uint32{}}}
	}
	cmd.Env = append([]string{
		dirEnv + "=" + work, "HOME=" + work, "TMPDIR=" + tmp, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
	}, opts.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testuser: %s as uid %d: %v:\n%s", t.Name(), UID, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("testuser: %s did not run as uid %d:\n%s", t.Name(), UID, out)
	}
	return string(out)
}

// reachableDir is a new temporary directory of t's that UID owns and reaches (the
// test's temporary directories are root's, 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, UID, GID); err != nil {
		t.Fatal(err)
	}
	return dir
}

// NoOverlayDir returns a directory, owned by [UID], on a file system on which no
// overlay can be mounted: an overlay of an overlay, at the kernel's limit of stacked
// file systems. A sandbox whose base directory is there meets what a kernel without
// overlayfs in user namespaces gives an ordinary user. It is unmounted when t ends.
func NoOverlayDir(t *testing.T) string {
	t.Helper()
	dir := reachableDir(t)
	p := func(d string) string { return filepath.Join(dir, d) }
	for _, d := range []string{"l", "u1", "w1", "a", "u2", "w2", "base"} {
		if err := os.Mkdir(p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []struct{ target, lower, upper, work string }{{"a", "l", "u1", "w1"}, {"base", "a", "u2", "w2"}} {
		opts := "lowerdir=" + p(m.lower) + ",upperdir=" + p(m.upper) + ",workdir=" + p(m.work)
		if err := unix.Mount("overlay", p(m.target), "overlay", 0, opts); err != nil {
			t.Fatalf("testuser: mounting an overlay: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(p(m.target), unix.MNT_DETACH) })
	}
	if err := os.Chown(p("base"), UID, GID); err != nil {
		t.Fatal(err)
	}
	return p("base")
}

// copyExecutable copies the running test binary to bin, mode 0755.
func copyExecutable(bin string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}
