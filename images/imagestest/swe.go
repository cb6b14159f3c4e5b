package imagestest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// SWEConfig is the config of the image [SWERef] pushes: a Debian PATH, a UTF-8
// locale, the repository's directory as the working directory, and root as the
// user (SWE-bench images run their tests as root).
func SWEConfig() v1.Config {
	return v1.Config{
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LANG=C.UTF-8",
		},
		WorkingDir: "/testbed",
		User:       "root",
	}
}

// swe is the image SWERef pushed, once per process.
var swe struct {
	once sync.Once
	ref  string
	err  error
}

// SWERef returns the reference of the repository test image, pushed to a registry
// of its own the first time a process asks for it: the test root of
// internal/testimage (Debian with python3, pytest and git; built once per machine
// and cached) as the base layer, and the toy repository (at /testbed, a git
// repository at its base commit) as a second layer, with [SWEConfig]. That registry
// serves for the rest of the process (it is never closed: tests that check for
// leaked goroutines ignore its server's, see [IgnoreGoroutines]).
//
// Packing the base layer costs a few seconds of CPU per test process.
func SWERef(tb testing.TB) string {
	tb.Helper()
	swe.once.Do(func() {
		base := testimage.Root(tb)
		repo, err := sweRepoLayer()
		if err != nil {
			swe.err = err
			return
		}
		defer os.RemoveAll(repo)
		img, err := image(SWEConfig(), base, repo)
		if err != nil {
			swe.err = fmt.Errorf("packing the SWE image: %w", err)
			return
		}
		swe.ref, swe.err = push(startRegistry(), "swe/toy:latest", img)
	})
	if swe.err != nil {
		tb.Fatalf("imagestest: SWERef: %v", swe.err)
	}
	if swe.ref == "" {
		tb.Fatalf("imagestest: SWERef: an earlier call failed")
	}
	return swe.ref
}

// IgnoreGoroutines returns the name of the function the goroutines of SWERef's
// registry run, for goleak.IgnoreTopFunction.
func IgnoreGoroutines() string { return "net/http.(*Server).Serve" }

// moduleRoot is the repository's root directory, found from this file's path.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// sweRepoLayer makes the toy repository's layer directory: testbed/, a git
// repository of testdata/swe/repo committed once.
func sweRepoLayer() (string, error) {
	src := filepath.Join(moduleRoot(), "testdata", "swe", "repo")
	dir, err := os.MkdirTemp("", "imagestest-swe-")
	if err != nil {
		return "", err
	}
	tb := filepath.Join(dir, "testbed")
	if err := os.Mkdir(tb, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(src); err == nil {
		if err := os.CopyFS(tb, os.DirFS(src)); err != nil {
			return "", fmt.Errorf("copying %s: %w", src, err)
		}
	} else {
		// The toy repository is not there yet: a placeholder package.
		if err := os.WriteFile(filepath.Join(tb, "calc.py"), []byte("def add(a, b):\n    return a - b\n"), 0o644); err != nil {
			return "", err
		}
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", tb, "-c", "user.name=toy", "-c", "user.email=toy@example.com",
			"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return nil
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		if err := git(args...); err != nil {
			return "", err
		}
	}
	return dir, nil
}
