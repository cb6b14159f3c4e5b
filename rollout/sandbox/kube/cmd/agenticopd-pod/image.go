package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// image writes the helper's own image as a docker-archive tarball (which docker
// load, ctr images import and crane push read): one layer holding this very binary
// at /agenticopd-pod, entrypoint [/agenticopd-pod, install, /.agenticopd] for the
// init container. The image is reproducible: a fixed timestamp, no history.
func image(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the tarball to write")
	tag := fs.String("tag", "", "the image's name and tag, as the cluster will pull it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || *tag == "" {
		fmt.Fprintln(stderr, "usage: agenticopd-pod image -o FILE.tar -tag NAME:TAG")
		return 2
	}
	if err := writeImage(*out, *tag); err != nil {
		fmt.Fprintf(stderr, "agenticopd-pod image: %v\n", err)
		return 1
	}
	return 0
}

func writeImage(out, tag string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	img, err := helperImage(self)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// helperImage is the image of the helper binary at path.
func helperImage(path string) (v1.Image, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	hdr := &tar.Header{Name: strings.TrimPrefix(podproto.HelperImagePath, "/"), Mode: 0o755, Size: int64(len(bin)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = goarch(), "linux"
	cf.Config.Entrypoint = []string{podproto.HelperImagePath, podproto.OpInstall, podproto.HelperDir}
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	return mutate.ConfigFile(img, cf)
}
