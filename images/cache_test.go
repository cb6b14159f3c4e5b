package images_test

import (
	"archive/tar"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

var _ bwrap.RootSource = (*images.Cache)(nil)

// TestRootFromRegistry pulls an image of two directory layers over HTTP, by tag and
// by digest: the second Root is served from the cache, and the config comes back.
func TestRootFromRegistry(t *testing.T) {
	base, repo := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(base, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(base, "etc", "os-release"), []byte("toy\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(base, "etc", "secret"), []byte("s\n"), 0o600))
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(base, "bin")))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "usr", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(base, "usr", "bin", "tool"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Link(filepath.Join(base, "usr", "bin", "tool"), filepath.Join(base, "usr", "bin", "tool2")))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "testbed"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "testbed", "calc.py"), []byte("def add(a, b): return a - b\n"), 0o644))

	reg := imagestest.NewRegistry(t)
	cfg := v1.Config{Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, WorkingDir: "/testbed", User: "1000"}
	ref := imagestest.Push(t, reg, "toy/repo:v1", cfg, base, repo)
	tag, err := name.ParseReference(ref)
	require.NoError(t, err)
	desc, err := remote.Head(tag)
	require.NoError(t, err)
	byDigest := tag.Context().Digest(desc.Digest.String()).String()

	img, err := remote.Image(tag)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	var requests, layerFetches atomic.Int64
	count := roundTripper(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		for _, l := range layers {
			if d, _ := l.Digest(); strings.HasSuffix(r.URL.Path, "/blobs/"+d.String()) {
				layerFetches.Add(1)
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	c := newCache(t, images.CacheConfig{Transport: count})
	r, err := c.Root(context.Background(), ref)
	require.NoError(t, err)
	t.Cleanup(r.Release)
	want := []string{
		"bin -> usr/bin",
		"etc/",
		"etc/os-release = toy\n",
		"etc/secret = s\n",
		"testbed/",
		"testbed/calc.py = def add(a, b): return a - b\n",
		"usr/",
		"usr/bin/",
		"usr/bin/tool = #!/bin/sh\n",
		"usr/bin/tool2 = #!/bin/sh\n",
	}
	if d := cmp.Diff(want, tree(t, r.Dir)); d != "" {
		t.Errorf("root (-want +got):\n%s", d)
	}
	if d := cmp.Diff(cfg, v1.Config{Env: r.Env, WorkingDir: r.WorkingDir, User: r.User}); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	a, err := os.Stat(filepath.Join(r.Dir, "usr", "bin", "tool"))
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(r.Dir, "usr", "bin", "tool2"))
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b), "a hard link of the image stays a hard link")
	if os.Geteuid() == 0 {
		st := a.Sys().(*syscall.Stat_t)
		require.Equal(t, uint32(bwrap.DefaultUID), st.Uid, "the tree belongs to the sandbox uid")
		fi, err := os.Stat(filepath.Join(r.Dir, "etc", "secret"))
		require.NoError(t, err)
		require.Equal(t, uint32(bwrap.DefaultUID), fi.Sys().(*syscall.Stat_t).Uid)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "its owner, the sandbox uid, reads a 0600 file")
	}
	require.Equal(t, images.Stats{Unpacks: 1}, c.Stats())

	// The same reference again, held and released: no request reaches the registry
	// (a registry's pull limits count manifest requests).
	n, nlayers := requests.Load(), layerFetches.Load()
	for range 2 {
		again, err := c.Root(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, r.Dir, again.Dir)
		again.Release()
	}
	require.Equal(t, n, requests.Load(), "requests for a reference already resolved")
	require.Equal(t, images.Stats{Unpacks: 1, Hits: 2}, c.Stats())

	// By digest: a reference of its own, resolved once, no layer fetched.
	r2, err := c.Root(context.Background(), byDigest)
	require.NoError(t, err)
	t.Cleanup(r2.Release)
	require.Equal(t, r.Dir, r2.Dir, "one image, one root")
	require.Equal(t, images.Stats{Unpacks: 1, Hits: 3}, c.Stats(), "the digest's Root unpacks nothing")
	require.Equal(t, int64(2), nlayers, "the first Root fetched the two layers")
	require.Equal(t, nlayers, layerFetches.Load(), "no layer fetched for an image on disk")

	// Another cache (another process, say) on the same directory finds it on disk.
	c2 := newCache(t, images.CacheConfig{Dir: c.Dir()})
	require.Equal(t, r.Dir, root(t, c2, ref))
	require.Equal(t, images.Stats{Hits: 1}, c2.Stats())
	nothingLeft(t, c)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRefForms reads one image through each kind of reference, and refuses bad ones
// with a message that says what a reference looks like.
func TestRefForms(t *testing.T) {
	img := imageOf(t, v1.Config{WorkingDir: "/w"}, tarLayer(t, ent{name: "w/f", body: "x"}))
	other := imageOf(t, v1.Config{WorkingDir: "/o"}, tarLayer(t, ent{name: "o/f", body: "y"}))
	lref := layoutRef(t, img)
	ldir := strings.TrimSuffix(strings.TrimPrefix(lref, images.OCILayoutPrefix), ":test")
	dgst, err := img.Digest()
	require.NoError(t, err)

	tdir := t.TempDir()
	one := filepath.Join(tdir, "one.tar")
	tagA, _ := name.NewTag("example.com/a/img:1")
	require.NoError(t, tarball.WriteToFile(one, tagA, img))
	two := filepath.Join(tdir, "two.tar")
	tagB, _ := name.NewTag("example.com/b:2")
	require.NoError(t, tarball.MultiWriteToFile(two, map[name.Tag]v1.Image{tagA: img, tagB: other}))

	reg := imagestest.NewRegistry(t)
	pushed := imagestest.PushImage(t, reg, "forms/img:t", img)

	ok := []struct {
		name, ref, workdir string
	}{
		{"registry tag", pushed, "/w"},
		{"registry digest", strings.TrimSuffix(pushed, ":t") + "@" + dgst.String(), "/w"},
		{"layout tag", lref, "/w"},
		{"layout digest", images.OCILayoutPrefix + ldir + "@" + dgst.String(), "/w"},
		{"layout only image", images.OCILayoutPrefix + ldir, "/w"},
		{"archive one image", images.DockerArchivePrefix + one, "/w"},
		{"archive by tag", images.DockerArchivePrefix + two + ":example.com/b:2", "/o"},
	}
	c := newCache(t, images.CacheConfig{})
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Root(context.Background(), tc.ref)
			require.NoError(t, err)
			defer r.Release()
			require.Equal(t, tc.workdir, r.WorkingDir)
			require.DirExists(t, filepath.Join(r.Dir, strings.TrimPrefix(tc.workdir, "/")))
		})
	}
	require.Equal(t, int64(2), c.Stats().Unpacks, "two images whatever the reference")

	bad := []struct {
		name, ref, want string
	}{
		{"garbage", "Not A Ref!!", "want registry/repo:tag"},
		{"layout missing", images.OCILayoutPrefix + filepath.Join(tdir, "nope"), "OCI layout"},
		{"layout unknown tag", images.OCILayoutPrefix + ldir + ":nope", `no image tagged "nope"`},
		{"layout bad digest", images.OCILayoutPrefix + ldir + "@sha256:zz", "digest"},
		{"archive missing", images.DockerArchivePrefix + filepath.Join(tdir, "nope.tar"), "docker archive"},
		{"archive two images, none named", images.DockerArchivePrefix + two, "docker archive"},
		{"registry unknown", reg.Host() + "/forms/none:t", "pulling"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Root(context.Background(), tc.ref)
			require.ErrorContains(t, err, tc.want)
			if tc.name == "garbage" || strings.Contains(tc.name, "digest") {
				require.ErrorIs(t, err, images.ErrBadRef)
			}
		})
	}
}

// TestWhiteouts applies a layer's whiteouts and opaque directories to the layers
// below it, never to what the same layer writes, whatever the entries' order.
func TestWhiteouts(t *testing.T) {
	lower := tarLayer(t,
		ent{name: "keep", body: "k"},
		ent{name: "gone", body: "g"},
		ent{name: "dir/", typ: tar.TypeDir},
		ent{name: "dir/old", body: "o"},
		ent{name: "dir/sub/", typ: tar.TypeDir},
		ent{name: "dir/sub/old", body: "o"},
		ent{name: "tree/", typ: tar.TypeDir},
		ent{name: "tree/a/", typ: tar.TypeDir},
		ent{name: "tree/a/b", body: "b"},
		ent{name: "late/", typ: tar.TypeDir},
		ent{name: "late/old", body: "o"},
	)
	upper := tarLayer(t,
		ent{name: ".wh.gone", typ: tar.TypeReg},
		ent{name: ".wh.tree", typ: tar.TypeReg},
		ent{name: "dir/", typ: tar.TypeDir},
		ent{name: "dir/.wh..wh..opq", typ: tar.TypeReg},
		ent{name: "dir/new", body: "n"},
		// entries of the opaque directory written before its marker survive it
		ent{name: "late/sub/new", body: "n"},
		ent{name: "late/new", body: "n"},
		ent{name: "late/.wh..wh..opq", typ: tar.TypeReg},
		// a whiteout of a name the same layer writes does not remove it
		ent{name: "fresh", body: "f"},
		ent{name: ".wh.fresh", typ: tar.TypeReg},
		ent{name: ".wh.never-was", typ: tar.TypeReg},
	)
	c := newCache(t, images.CacheConfig{})
	got := tree(t, root(t, c, layoutRef(t, imageOf(t, v1.Config{}, lower, upper))))
	want := []string{
		"dir/",
		"dir/new = n",
		"fresh = f",
		"keep = k",
		"late/",
		"late/new = n",
		"late/sub/",
		"late/sub/new = n",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("root (-want +got):\n%s", d)
	}
}

// TestConcurrentRoots: rollouts of one process ask for a new image at once; it is
// unpacked once, every one of them gets it, and it stays until the last release.
func TestConcurrentRoots(t *testing.T) {
	ref := layoutRef(t, bigImage(t, 500, 1000, "cc"))
	c := newCache(t, images.CacheConfig{MaxBytes: 1}) // anything not in use is evicted
	const n = 8
	roots := make([]bwrap.ImageRoot, n)
	var g errgroup.Group
	for i := range roots {
		g.Go(func() error {
			r, err := c.Root(context.Background(), ref)
			roots[i] = r
			return err
		})
	}
	require.ErrorIs(t, g.Wait(), images.ErrTooLarge, "MaxBytes 1 refuses the image")

	c = newCache(t, images.CacheConfig{MaxBytes: 64 << 20})
	g = errgroup.Group{}
	for i := range roots {
		g.Go(func() error {
			r, err := c.Root(context.Background(), ref)
			roots[i] = r
			return err
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, images.Stats{Unpacks: 1, Hits: n - 1}, c.Stats())
	for _, r := range roots[1:] {
		require.Equal(t, roots[0].Dir, r.Dir)
	}
	for _, r := range roots {
		r.Release()
	}
	require.DirExists(t, roots[0].Dir, "within the bound, a released image stays")
}

// TestPlatformFromIndex: a multi-platform index, in a registry or a layout, gives
// the image of the cache's platform (this machine's by default); an index without
// it is refused, naming the platform.
func TestPlatformFromIndex(t *testing.T) {
	amd := imageOf(t, v1.Config{WorkingDir: "/amd64"}, tarLayer(t, ent{name: "amd64/f", body: "a"}))
	arm := imageOf(t, v1.Config{WorkingDir: "/arm64"}, tarLayer(t, ent{name: "arm64/f", body: "b"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	reg := imagestest.NewRegistry(t)
	tag, err := name.NewTag(reg.Host() + "/multi/img:1")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(tag, idx))
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	require.NoError(t, err)
	require.NoError(t, p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": "multi"})))
	lref := images.OCILayoutPrefix + dir + ":multi"

	for _, tc := range []struct {
		name     string
		platform *v1.Platform
		want     string
	}{
		{"this machine", nil, "/" + runtime.GOARCH},
		{"amd64", &v1.Platform{OS: "linux", Architecture: "amd64"}, "/amd64"},
		{"arm64", &v1.Platform{OS: "linux", Architecture: "arm64"}, "/arm64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, images.CacheConfig{Platform: tc.platform})
			for _, ref := range []string{tag.String(), lref} {
				r, err := c.Root(context.Background(), ref)
				require.NoError(t, err, ref)
				require.Equal(t, tc.want, r.WorkingDir, ref)
				r.Release()
			}
		})
	}
	c := newCache(t, images.CacheConfig{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}})
	_, err = c.Root(context.Background(), lref)
	require.ErrorContains(t, err, "no image for platform linux/s390x")
	_, err = c.Root(context.Background(), tag.String())
	require.ErrorContains(t, err, "s390x")
}
