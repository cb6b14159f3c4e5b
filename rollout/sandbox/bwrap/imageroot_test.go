package bwrap_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/internal/testimage"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// testImage is an image for the tests: the Debian root of internal/testimage with
// layers of the test's own on top (an overlay the test mounts: the sandbox must
// never write in it), and its config.
type testImage struct {
	dir string
	cfg bwrap.ImageRoot
}

// imageSource is a RootSource over test images, counting what it hands out.
type imageSource struct {
	mu       sync.Mutex
	images   map[string]testImage
	roots    atomic.Int32
	released atomic.Int32
}

func (s *imageSource) Root(ctx context.Context, ref string) (bwrap.ImageRoot, error) {
	s.mu.Lock()
	img, ok := s.images[ref]
	s.mu.Unlock()
	if !ok {
		return bwrap.ImageRoot{}, fmt.Errorf("no image %q", ref)
	}
	s.roots.Add(1)
	r := img.cfg
	r.Dir = img.dir
	var once sync.Once
	r.Release = func() { once.Do(func() { s.released.Add(1) }) }
	return r, nil
}

// add registers ref as the test image with files (path → content; a path ending in
// "/" is a directory) over the Debian root, and the config cfg. The image's root is
// a directory on the disk, as an image cache unpacks it: the Debian root's files
// hard-linked (the sandbox never writes in an image), the test's own written anew.
func (s *imageSource) add(t testing.TB, ref string, files map[string]string, cfg bwrap.ImageRoot) string {
	t.Helper()
	dir := filepath.Join(reachableDir(t), "root")
	out, err := exec.Command("cp", "-al", testimage.Root(t), dir).CombinedOutput()
	require.NoError(t, err, "hard-linking the test image's root (the test's temporary directory must be on the file system of %s): %s", testimage.CacheBase(), out)
	writeLayer(t, dir, files)
	s.register(ref, dir, cfg)
	return dir
}

// addOverlay is add with the image's root an overlay (the test's files over the
// Debian root), a file system that refuses idmapped mounts.
func (s *imageSource) addOverlay(t testing.TB, ref string, files map[string]string, cfg bwrap.ImageRoot) string {
	t.Helper()
	layer := t.TempDir()
	writeLayer(t, layer, files)
	dir := mountImageRoot(t, layer)
	s.register(ref, dir, cfg)
	return dir
}

// writeLayer writes files under dir, replacing (never writing through) what is there.
func writeLayer(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if name[len(name)-1] == '/' {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.RemoveAll(p)) // a hard link to the shared Debian root
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// reachableDir is a temporary directory the sandbox uid can traverse.
func reachableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return dir
}

func (s *imageSource) register(ref, dir string, cfg bwrap.ImageRoot) {
	s.mu.Lock()
	if s.images == nil {
		s.images = map[string]testImage{}
	}
	s.images[ref] = testImage{dir: dir, cfg: cfg}
	s.mu.Unlock()
}

// mountImageRoot mounts layer over the Debian test root, read-only, and returns where.
func mountImageRoot(t testing.TB, layer string) string {
	t.Helper()
	base := testimage.Root(t)
	dir := reachableDir(t)
	require.NoError(t, unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, "lowerdir="+layer+":"+base))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// gitRepo makes a git repository of files in a new directory (one commit) and
// returns the files of its tree, .git included, as a map for imageSource.add.
func gitRepo(t testing.TB, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	cmd := exec.Command("sh", "-c", "git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm base")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	tree := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			tree[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		tree[rel] = string(b)
		return err
	}))
	return tree
}

// under prefixes every path of files with dir.
func under(dir string, files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[filepath.Join(dir, k)+map[bool]string{true: "/"}[k[len(k)-1] == '/']] = v
	}
	return out
}
