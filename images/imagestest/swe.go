package imagestest

import (
	"errors"
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

// swe is the image SWERef packs, once per process.
var swe packed

// SWERef returns the reference of the repository test image in a registry of its
// own that tb's cleanup closes: the test root of internal/testimage (Debian with
// python3, pytest and git; built once per machine and cached) as the base layer,
// and the toy repository of testdata/swe (at /testbed, a git repository at the toy
// tasks' base commit, made by testdata/swe/make-testbed.sh) as a second layer, with
// [SWEConfig]. The image is packed once per process (a few seconds of CPU; its
// compressed layers stay in memory) and pushed on every call (under a second), so
// every call gives the same image, whose root a cache unpacks once; the reference
// is valid until tb ends.
func SWERef(tb testing.TB) string {
	tb.Helper()
	return sweRef(tb, "SWERef", &swe, testimage.Bookworm, "swe/toy:latest")
}

// sweRef is SWERef on the root of variant v, packed into p and pushed as name.
func sweRef(tb testing.TB, fn string, p *packed, v testimage.Variant, name string) string {
	tb.Helper()
	base := testimage.RootFor(tb, v)
	img, err := p.get(func() (v1.Image, error) {
		repo, err := sweRepoLayer()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(repo)
		img, err := image(SWEConfig(), base, repo)
		if err != nil {
			return nil, fmt.Errorf("packing the SWE image: %w", err)
		}
		return img, nil
	})
	if err != nil {
		tb.Fatalf("imagestest: %s: %v", fn, err)
	}
	return PushImage(tb, NewRegistry(tb), name, img)
}

// packed is an image packed once per process.
type packed struct {
	once sync.Once
	img  v1.Image
	err  error
}

// get returns the image pack makes, calling pack on the first call only.
func (p *packed) get(pack func() (v1.Image, error)) (v1.Image, error) {
	p.once.Do(func() { p.img, p.err = pack() })
	if p.err == nil && p.img == nil {
		return nil, errors.New("an earlier call failed")
	}
	return p.img, p.err
}

// moduleRoot is the repository's root directory, found from this file's path.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// sweRepoLayer makes the toy repository's layer directory (testbed/, a git
// repository of one commit whose hash the toy tasks name as their base commit) with
// testdata/swe/make-testbed.sh.
func sweRepoLayer() (string, error) {
	script := filepath.Join(moduleRoot(), "testdata", "swe", "make-testbed.sh")
	dir, err := os.MkdirTemp("", "imagestest-swe-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("sh", script, dir).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %v: %s", script, err, out)
	}
	return dir, nil
}
