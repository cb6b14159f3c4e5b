package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
)

// ent is one crafted tar entry.
type ent struct {
	name string
	typ  byte // tar.TypeReg if zero
	body string
	link string
	mode int64
}

var epoch = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// tarLayer packs ents, in order, into a layer: whatever a hostile image holds.
func tarLayer(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, ModTime: epoch}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := io.WriteString(tw, e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	require.NoError(t, err)
	return l
}

// layoutRef writes img to a fresh OCI layout (tagged "test") and returns
// "oci-layout:dir:test".
func layoutRef(t testing.TB, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	require.NoError(t, err)
	require.NoError(t, p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": "test"})))
	return images.OCILayoutPrefix + dir + ":test"
}

// imageOf makes an image of crafted layers.
func imageOf(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := imagestest.ImageOf(cfg, layers...)
	require.NoError(t, err)
	return img
}

// newCache makes a cache in a fresh directory every uid can reach.
func newCache(t testing.TB, cfg images.CacheConfig) *images.Cache {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = reachableDir(t)
	}
	c, err := images.NewCache(cfg)
	require.NoError(t, err)
	return c
}

// reachableDir is a temporary directory the sandbox uid can search.
func reachableDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "images-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(d, 0o755))
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// tree lists a root: "path type mode [-> target | = content]" per entry, sorted.
func tree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		line := rel
		switch {
		case fi.IsDir():
			line += "/"
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			line += " = " + string(b)
		default:
			line += " " + fi.Mode().Type().String()
		}
		out = append(out, line)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// root gets ref from c and registers its release.
func root(t testing.TB, c *images.Cache, ref string) string {
	t.Helper()
	r, err := c.Root(context.Background(), ref)
	require.NoError(t, err)
	t.Cleanup(r.Release)
	return r.Dir
}

// nothingLeft checks that a cache's tmp holds no unfinished unpack.
func nothingLeft(t testing.TB, c *images.Cache) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(c.Dir(), "tmp"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "left in %s/tmp", c.Dir())
}
