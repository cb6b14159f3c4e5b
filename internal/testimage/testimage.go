// Package testimage gives tests a real root file system to run repository tasks in, a
// minimal Debian that build-root.sh builds with mmdebstrap from the Debian mirror this
// machine's apt uses (the URIs of /etc/apt/sources.list.d/*.sources, or a deb line of
// /etc/apt/sources.list; $AGENTICOPD_DEBIAN_MIRROR overrides them). Three [Variant]s:
//
//   - [Bookworm], the default ([Root]): Debian 12 with python3 (3.11), pytest, git,
//     patch, bash, coreutils and ca-certificates;
//   - [OldPython]: the same packages from Debian 11 (bullseye), Python 3.9 and pytest
//     6.0, the kind of Python most SWE-bench images run (3.6 to 3.9);
//   - [Golang]: Debian 12 with golang-go (Go 1.19), gcc and libc6-dev (so cgo and
//     -race work, as in the official Go images), git, patch, bash, coreutils and
//     ca-certificates, for a Go repository whose tests run with go test.
//
// [RootFor] builds a variant once per version of the script and caches it on disk,
// under [CacheBase] in a directory named by the variant and the script's SHA-256
// ([Key]), so every test process of every package shares one build and a changed
// script builds anew. Concurrent processes take a file lock (flock) next to the cache
// entry: one builds, the others wait for it and use its result. A build goes into a
// temporary directory that is renamed into place only when it is complete, so a build
// killed half-way (SIGKILL included) leaves nothing that looks finished; the kernel
// drops the lock with the process, and the next build removes the half-made directory.
// A missing mmdebstrap, or no Debian mirror in apt's sources, fails the test with what
// to do: never a skip.
package testimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

//go:embed build-root.sh
var script []byte

// Variant is one of the test roots; its zero value is [Bookworm].
type Variant int

// The test roots build-root.sh builds.
const (
	// Bookworm is Debian 12 with python3 (3.11), pytest, git, patch, bash, coreutils
	// and ca-certificates: the root [Root] returns.
	Bookworm Variant = iota
	// OldPython is Debian 11 (bullseye) with the packages of [Bookworm]: Python 3.9,
	// pytest 6.0.
	OldPython
	// Golang is Debian 12 with golang-go (Go 1.19), gcc, libc6-dev, git, patch, bash,
	// coreutils and ca-certificates.
	Golang
)

// String returns the variant's name as build-root.sh takes it: "bookworm",
// "oldpython" or "golang".
func (v Variant) String() string {
	switch v {
	case Bookworm:
		return "bookworm"
	case OldPython:
		return "oldpython"
	case Golang:
		return "golang"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

func (v Variant) valid() bool { return v >= Bookworm && v <= Golang }

// InstallHint is the command that installs what [RootFor] needs.
const InstallHint = "apt-get install -y --no-install-recommends mmdebstrap"

// CacheEnv names the environment variable that overrides [CacheBase].
const CacheEnv = "AGENTICOPD_TESTIMAGE_DIR"

// buildTimeout bounds one build (about half a minute on a warm mirror; a slow mirror
// takes longer): a failure guard, not a measure.
const buildTimeout = 20 * time.Minute

// CacheBase returns the directory the cached roots live under: $AGENTICOPD_TESTIMAGE_DIR,
// or /var/tmp/agenticopd-testimage.
func CacheBase() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return "/var/tmp/agenticopd-testimage"
}

// Key returns the cache key of variant v built by the current script: the variant's
// name, a dash and the first 16 hex digits of the script's SHA-256.
func Key(v Variant) string {
	sum := sha256.Sum256(script)
	return v.String() + "-" + hex.EncodeToString(sum[:])[:16]
}

// Root returns the path of the test image's root file system, [Bookworm]'s:
// RootFor(tb, Bookworm).
func Root(tb testing.TB) string {
	tb.Helper()
	return RootFor(tb, Bookworm)
}

// RootFor returns the path of variant v's root file system, building it first when
// no finished build of it by the current script is cached. It fails tb (never skips)
// when the root cannot be built, with mmdebstrap's install command when that is
// missing. The returned directory is shared: callers must not write in it.
func RootFor(tb testing.TB, v Variant) string {
	tb.Helper()
	dir, err := Ensure(context.Background(), CacheBase(), v)
	if err != nil {
		tb.Fatalf("testimage: %v", err)
	}
	return dir
}

// Ensure returns the root file system of variant v built by the current script under
// base (base/KEY/root, KEY as [Key] says), building it when it is not there yet. It is
// what [RootFor] calls.
func Ensure(ctx context.Context, base string, v Variant) (string, error) {
	if !v.valid() {
		return "", fmt.Errorf("unknown variant %v: Bookworm, OldPython or Golang", v)
	}
	return ensure(ctx, base, Key(v), func(ctx context.Context, dir string) error { return build(ctx, dir, v) })
}

// Cached returns base/key/root under [CacheBase], made by build when no finished
// build of key is there yet: build fills the directory it is given, which becomes
// that root, under the same lock and with the same clean-up of half-made builds as
// the roots [Ensure] builds. It is for what tests derive from a root and should make
// once per machine (key must change whenever what build makes would).
func Cached(ctx context.Context, key string, build func(ctx context.Context, root string) error) (string, error) {
	return ensure(ctx, CacheBase(), key, func(ctx context.Context, dir string) error {
		root := filepath.Join(dir, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			return err
		}
		return build(ctx, root)
	})
}

// ensure is Ensure with the key and the builder (which fills dir/root) given.
func ensure(ctx context.Context, base, key string, build func(ctx context.Context, dir string) error) (string, error) {
	base = filepath.Clean(base)
	final := filepath.Join(base, key)
	if complete(final) {
		return filepath.Join(final, "root"), nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	unlock, err := lock(ctx, final+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(final) { // another process built it while this one waited
		return filepath.Join(final, "root"), nil
	}
	// Holding the lock, nothing else builds: whatever half-made build is here was left
	// by a process that died.
	if err := removeStale(base, key); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, key+".build-")
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 would hide the root from sandbox uids
		return "", err
	}
	if err := build(ctx, tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("moving the built root into place: %w", err)
	}
	return filepath.Join(final, "root"), nil
}

// complete reports whether dir holds a finished build: the root and the marker
// written after it.
func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "complete"))
	return err == nil
}

// build runs the script for variant v into tmp/root.
func build(ctx context.Context, tmp string, v Variant) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("mmdebstrap not found, needed to build the test image's root: %s", InstallHint)
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	sh := filepath.Join(tmp, "build-root.sh")
	if err := os.WriteFile(sh, script, 0o755); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", sh, filepath.Join(tmp, "root"), v.String())
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build-root.sh %s failed (%w):\n%s", v, err, tail(out.String(), 4000))
	}
	return os.Remove(sh)
}

// removeStale removes the half-made builds of key under base.
func removeStale(base, key string) error {
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), key+".build-") {
			if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing a half-made build: %w", err)
			}
		}
	}
	return nil
}

// lock takes an exclusive flock on path, waiting for it until ctx ends.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("cache lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process's build: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
