// Package binimage builds container images that hold one static program and nothing else: the
// test cluster's pause image and the small images tests run as pods. It links only
// go-containerregistry, so the command that writes the pause image stays quick to build.
package binimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// New returns an image for linux on the running architecture whose one layer holds the
// program read from bin at the absolute path dst (mode 0755, owned by root), with entrypoint
// as the image's entrypoint (dst alone when empty). The program must be static: the image has
// no libc and no shell.
func New(bin, dst string, entrypoint ...string) (v1.Image, error) {
	if !path.IsAbs(dst) || strings.HasSuffix(dst, "/") {
		return nil, fmt.Errorf("binimage: %q is not an absolute file path", dst)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The parent directories first, as a layer from a real file system has them.
	parts := strings.Split(strings.TrimPrefix(dst, "/"), "/")
	for i := 1; i < len(parts); i++ {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("binimage: %w", err)
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(prog)), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	if _, err := tw.Write(prog); err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	layerTar := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	if len(entrypoint) == 0 {
		entrypoint = []string{dst}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("binimage: %w", err)
	}
	return img, nil
}
