package imagestest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

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

// SWERef returns the reference of the repository test image in a registry of its
// own that tb's cleanup closes: the test root of internal/testimage (Debian with
// python3, pytest and git; built once per machine and cached) as the base layer,
// and the toy repository of testdata/swe (at /testbed, a git repository at the toy
// tasks' base commit, made by testdata/swe/make-testbed.sh) as a second layer, with
// [SWEConfig]. The reference is valid until tb ends; every call gives the same
// image, whose root a cache unpacks once.
//
// The image is packed once per machine, into an OCI layout cached beside the root
// (a few seconds of CPU, under the cache's lock; the cache key follows the root's,
// the toy repository's files and the packing), and each call's registry serves that
// layout's blobs from disk. A push then only checks that the blobs are there and
// writes the manifest: no layer is copied into memory, which the race detector
// would make cost seconds per call. Blobs pushed by tests into the registry are
// kept in its memory, never in the shared layout.
func SWERef(tb testing.TB) string {
	tb.Helper()
	return sweRef(tb, "SWERef", testimage.Bookworm, "swe/toy:latest")
}

// sweRef is SWERef on the root of variant v, pushed as name.
func sweRef(tb testing.TB, fn string, v testimage.Variant, name string) string {
	tb.Helper()
	dir, err := sweLayout(context.Background(), v)
	if err != nil {
		tb.Fatalf("imagestest: %s: %v", fn, err)
	}
	img, err := layoutImage(dir, ToyTag)
	if err != nil {
		tb.Fatalf("imagestest: %s: the cached layout %s: %v", fn, dir, err)
	}
	reg := startRegistryOver(filepath.Join(dir, "blobs"))
	tb.Cleanup(reg.Close)
	return PushImage(tb, reg, name, img)
}

// sweLayoutVersion names how sweLayout packs its image; it is part of the cache key,
// so a change to the packing (writeTar, image, writeLayout) must change it.
const sweLayoutVersion = "swe-layout-1"

// sweLayout returns the directory of the OCI layout holding the toy repository's
// image on variant v's root, tagged ToyTag, packing it first when this machine has
// not yet.
func sweLayout(ctx context.Context, v testimage.Variant) (string, error) {
	key, err := sweKey(v)
	if err != nil {
		return "", err
	}
	return testimage.Cached(ctx, key, func(ctx context.Context, dir string) error {
		base, err := testimage.Ensure(ctx, testimage.CacheBase(), v)
		if err != nil {
			return err
		}
		repo, err := sweRepoLayer()
		if err != nil {
			return err
		}
		defer os.RemoveAll(repo)
		img, err := image(SWEConfig(), base, repo)
		if err != nil {
			return fmt.Errorf("packing the SWE image: %w", err)
		}
		return writeLayout(dir, img)
	})
}

// sweKey is the cache key of sweLayout's image on variant v: "swe-", the root's key,
// and the first 16 hex digits of a SHA-256 over the packing's version, the config,
// and the names and contents of testdata/swe's make-testbed.sh and repo/.
func sweKey(v testimage.Variant) (string, error) {
	h := sha256.New()
	cfg, err := json.Marshal(SWEConfig())
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\n%s\n", sweLayoutVersion, cfg)
	swe := filepath.Join(moduleRoot(), "testdata", "swe")
	for _, top := range []string{"make-testbed.sh", "repo"} {
		err := filepath.WalkDir(filepath.Join(swe, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(swe, path)
			fmt.Fprintf(h, "%s %d\n", rel, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("the toy repository's files: %w", err)
		}
	}
	return "swe-" + testimage.Key(v) + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// layoutImage returns the image tagged tag in the OCI layout at dir.
func layoutImage(dir, tag string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == tag {
			return p.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image tagged %q", tag)
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
