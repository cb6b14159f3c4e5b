// Package imagestest serves container images to tests over real HTTP on loopback:
// an in-process registry (go-containerregistry's pkg/registry behind an
// httptest.Server), images packed from directories, and [SWERef], the repository
// test image (a Debian root with python3, pytest and git, and the toy repository at
// /testbed), and [SWEOldPythonRef], the same image on Python 3.9, so that the pull path
// tested is the one a real registry exercises.
//
// For demos and programs, not only tests: [WriteToyLayout] writes the toy repository's
// image as an OCI layout on disk (no registry), [ToyTasks] are its tasks, and
// [ToyStudent] is a scripted student for the vllmtest simulator that fixes the first
// of them in half its rollouts (examples/repo-demo runs them end to end).
//
// The registry speaks the OCI distribution API as pkg/registry implements it: blobs
// and manifests by digest and tag, chunked and monolithic uploads, no auth. It keeps
// everything in memory, except that the repository images' registries serve the
// cached layout's blobs from disk.
package imagestest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Registry is an in-process OCI registry listening on 127.0.0.1.
type Registry struct {
	srv *httptest.Server
}

// NewRegistry starts a registry that tb's cleanup closes.
func NewRegistry(tb testing.TB) *Registry {
	tb.Helper()
	r := startRegistry()
	tb.Cleanup(r.Close)
	return r
}

func startRegistry() *Registry {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return &Registry{srv: httptest.NewServer(h)}
}

// startRegistryOver starts a registry that serves the blobs of an OCI layout's blobs
// directory (dir/sha256/HEX) from disk, read-only, and keeps the blobs pushed to it
// in memory.
func startRegistryOver(dir string) *Registry {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(&layoutBlobs{dir: dir, mem: map[v1.Hash][]byte{}}))
	return &Registry{srv: httptest.NewServer(h)}
}

// layoutBlobs is a registry's blob store over a layout's blobs directory: a blob is
// the layout's file when it has one (named by its digest, written whole when the
// layout was made, so its size is its Stat), and otherwise one pushed to this store.
type layoutBlobs struct {
	dir string
	mu  sync.Mutex
	mem map[v1.Hash][]byte
}

func (b *layoutBlobs) path(h v1.Hash) string { return filepath.Join(b.dir, h.Algorithm, h.Hex) }

func (b *layoutBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	if fi, err := os.Stat(b.path(h)); err == nil && fi.Mode().IsRegular() {
		return fi.Size(), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if blob, ok := b.mem[h]; ok {
		return int64(len(blob)), nil
	}
	return 0, registry.ErrNotFound
}

func (b *layoutBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	if f, err := os.Open(b.path(h)); err == nil {
		return f, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if blob, ok := b.mem[h]; ok {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}
	return nil, registry.ErrNotFound
}

func (b *layoutBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	blob, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mem[h] = blob
	return nil
}

// Host returns the registry's "127.0.0.1:port", the first part of its references.
// go-containerregistry speaks plain HTTP to a loopback registry.
func (r *Registry) Host() string {
	u, _ := url.Parse(r.srv.URL)
	return u.Host
}

// Close stops the registry; it may be called more than once.
func (r *Registry) Close() { r.srv.Close() }

// Push packs each of layerDirs into a layer (the directory's contents at the
// image's root, bottom layer first), makes an image of them with cfg (its Env,
// WorkingDir, User…) for linux on this machine's architecture, pushes it to reg as
// name ("repo" or "repo:tag"; tag "latest" if none) and returns its reference,
// "host/repo:tag". Files are packed as root's (uid and gid 0), with their modes,
// mtimes, symlinks and hard links; sockets are left out.
func Push(tb testing.TB, reg *Registry, name string, cfg v1.Config, layerDirs ...string) string {
	tb.Helper()
	img, err := image(cfg, layerDirs...)
	if err != nil {
		tb.Fatalf("imagestest: %v", err)
	}
	return PushImage(tb, reg, name, img)
}

// PushImage pushes img to reg as name ("repo" or "repo:tag") and returns its
// reference, "host/repo:tag".
func PushImage(tb testing.TB, reg *Registry, repo string, img v1.Image) string {
	tb.Helper()
	ref, err := push(reg, repo, img)
	if err != nil {
		tb.Fatalf("imagestest: %v", err)
	}
	return ref
}

func push(reg *Registry, repo string, img v1.Image) (string, error) {
	if !strings.Contains(repo, ":") {
		repo += ":latest"
	}
	tag, err := name.NewTag(reg.Host() + "/" + repo)
	if err != nil {
		return "", fmt.Errorf("name %q: %w", repo, err)
	}
	if err := remote.Write(tag, img); err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	return tag.String(), nil
}

// image makes an OCI image of layerDirs (each one gzip layer, bottom first) with
// config cfg, for linux on this machine's architecture.
func image(cfg v1.Config, layerDirs ...string) (v1.Image, error) {
	var layers []v1.Layer
	for _, dir := range layerDirs {
		l, err := DirLayer(dir)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	return ImageOf(cfg, layers...)
}

// ImageOf makes an OCI image of layers with config cfg, for linux on this
// machine's architecture.
func ImageOf(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// DirLayer packs dir into a gzip layer (entries relative to dir, so dir is the
// image's root), stored without compression: a real layer's gzip stream, at a small
// part of the cost of compressing (which, under the race detector, took most of an
// image test's time). The tar is written to a temporary file first and removed once
// the layer's bytes are held in memory.
func DirLayer(dir string) (v1.Layer, error) {
	f, err := os.CreateTemp("", "imagestest-layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if err := writeTar(f, dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.NoCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	// Compress now, while the file exists; the layer keeps the compressed bytes.
	if _, err := l.Digest(); err != nil {
		return nil, err
	}
	if _, err := l.DiffID(); err != nil {
		return nil, err
	}
	return l, nil
}

// writeTar writes dir's tree to w as a layer's tar stream: names relative to dir,
// uid and gid 0, hard links as links to their first name, sockets left out.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	links := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			if first, ok := links[st.Ino]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[st.Ino] = hdr.Name
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
