package imagestest

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// goStdArchives is where Debian's Go 1.19 keeps its compiled standard library, which
// the Go image of [SWEGoRef] removes (Go 1.20 and later ship none: the go command
// compiles the standard library into its build cache).
const goStdArchives = "usr/lib/go-1.19/pkg/linux_amd64"

// sweGoTag is the tag of the Go repository test image in its OCI layout.
const sweGoTag = "swe-go-toy"

// sweGo is the image SWEGoRef writes, made once per process.
var sweGo packed

// SWEGoRef returns the reference of the Go repository test image, in an OCI image
// layout in a temporary directory of tb's ("oci-layout:DIR:swe-go-toy"), valid until
// tb ends: the Golang root of internal/testimage (Debian 12 with Go 1.19, gcc, git
// and patch; built once per machine and cached) as the base layer; a second layer
// with the Go toy repository of testdata/swe-go at /testbed (a git repository at the
// task's base commit, made by testdata/swe-go/make-testbed.sh; standard library only,
// so its tests need no network) and a whiteout that removes Debian's compiled
// standard library, so that the go command compiles the standard library's packages
// into its build cache, as Go 1.20 and later (the Go of SWE-style images) do; with
// [SWEConfig], which sets no GOCACHE, as SWE-style Go images set none.
//
// The root (about 900 MB) is streamed, never held in memory: from its directory into
// the layout (a few seconds on every call), and from the layout into the image
// cache that opens the reference. A registry would hold every layer in memory, which
// the race detector multiplies past what a test machine has.
func SWEGoRef(tb testing.TB) string {
	tb.Helper()
	base := testimage.RootFor(tb, testimage.Golang)
	img, err := sweGo.get(func() (v1.Image, error) {
		top, err := goRepoLayer()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(top)
		bottom, err := streamedLayer(base)
		if err != nil {
			return nil, fmt.Errorf("the Golang root's layer: %w", err)
		}
		upper, err := DirLayer(top)
		if err != nil {
			return nil, err
		}
		return ImageOf(SWEConfig(), bottom, upper)
	})
	if err != nil {
		tb.Fatalf("imagestest: SWEGoRef: %v", err)
	}
	dir := tb.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err == nil {
		err = p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": sweGoTag}))
	}
	if err != nil {
		tb.Fatalf("imagestest: SWEGoRef: writing the OCI layout: %v", err)
	}
	return "oci-layout:" + dir + ":" + sweGoTag
}

// streamedLayer is a layer of dir's tree, as [DirLayer] packs it, read from the
// directory each time the layer is read (the tree must not change meanwhile): a gzip
// stream of stored blocks of a tar stream that a goroutine writes into a pipe, and
// that ends when the reader closes it or the tree is written.
func streamedLayer(dir string) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { w.CloseWithError(writeTar(w, dir)) }()
		return r, nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.NoCompression))
}

// goRepoLayer makes the Go image's second layer in a new directory: testbed/, the
// Go toy repository (a git repository of one commit whose hash the task names as its
// base commit), made by testdata/swe-go/make-testbed.sh, and the whiteout of
// goStdArchives.
func goRepoLayer() (string, error) {
	script := filepath.Join(moduleRoot(), "testdata", "swe-go", "make-testbed.sh")
	dir, err := os.MkdirTemp("", "imagestest-swe-go-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("sh", script, dir).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %v: %s", script, err, out)
	}
	wh := filepath.Join(dir, filepath.Dir(goStdArchives), ".wh."+filepath.Base(goStdArchives))
	if err := os.MkdirAll(filepath.Dir(wh), 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.WriteFile(wh, nil, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
