package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// ImportImage imports the image at src into the node's containerd as name, for pods that
// run it with imagePullPolicy Never. src is one of
//
//   - "oci-layout:DIR:TAG", the form images/imagestest returns: the image DIR's index names
//     TAG (its org.opencontainers.image.ref.name annotation);
//   - DIR, an OCI image layout that holds one image;
//   - FILE, a docker-archive tarball of one image (docker save, tarball.Write).
//
// name must be a local name with a domain and a tag, such as agenticopd.local/task:1, so
// that containerd and the kubelet agree on it and nobody mistakes it for a registry's.
func (e *Env) ImportImage(ctx context.Context, src, name string) error {
	img, err := readImage(src)
	if err != nil {
		return fmt.Errorf("kubetest: ImportImage %s: %w", src, err)
	}
	return e.Import(ctx, img, name)
}

// Import imports img into the node's containerd as name (see [Env.ImportImage] for the
// names it takes): it streams img as a docker-archive tarball into ctr images import, which
// stores and unpacks it. Importing a name again replaces the image it names.
func (e *Env) Import(ctx context.Context, img v1.Image, name string) error {
	tag, err := localTag(name)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "ctr", "-a", e.socket, "-n", "k8s.io", "images", "import", "-")
	cmd.Stdin = r
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("kubetest: Import %s: %w", name, err)
	}
	r.Close()
	// Written here, not in a goroutine: when ctr ends early the write fails (EPIPE).
	werr := tarball.Write(tag, img, w)
	w.Close()
	err = cmd.Wait()
	if err != nil {
		return fmt.Errorf("kubetest: Import %s: ctr images import: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	if werr != nil {
		return fmt.Errorf("kubetest: Import %s: writing the image: %w", name, werr)
	}
	return nil
}

// localTag parses name, which must state its domain and tag: no default registry, no
// default tag.
func localTag(s string) (name.Tag, error) {
	tag, err := name.NewTag(s, name.StrictValidation)
	first, _, found := strings.Cut(s, "/")
	if err == nil && (!found || !(strings.ContainsAny(first, ".:") || first == "localhost")) {
		err = fmt.Errorf("no domain")
	}
	if err != nil {
		return name.Tag{}, fmt.Errorf("kubetest: image name %q: %v: want a local name with a domain and a tag, such as agenticopd.local/NAME:TAG", s, err)
	}
	return tag, nil
}

func readImage(src string) (v1.Image, error) {
	if rest, ok := strings.CutPrefix(src, "oci-layout:"); ok {
		i := strings.LastIndex(rest, ":")
		if i < 0 {
			return nil, fmt.Errorf("want oci-layout:DIR:TAG")
		}
		return layoutImage(rest[:i], rest[i+1:])
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return layoutImage(src, "")
	}
	return tarball.ImageFromPath(src, nil)
}

// layoutImage reads the image dir's index names tag, or its only image when tag is empty.
// An index in the index (several platforms) gives its image for linux on this machine.
func layoutImage(dir, tag string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var found []v1.Descriptor
	for _, d := range im.Manifests {
		if tag == "" || d.Annotations[refNameAnnotation] == tag {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d images in %s are named %q; want one", len(found), dir, tag)
	}
	d := found[0]
	if !d.MediaType.IsIndex() {
		return idx.Image(d.Digest)
	}
	inner, err := idx.ImageIndex(d.Digest)
	if err != nil {
		return nil, err
	}
	m, err := inner.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, p := range m.Manifests {
		if p.Platform != nil && p.Platform.OS == "linux" && p.Platform.Architecture == runtime.GOARCH {
			return inner.Image(p.Digest)
		}
	}
	return nil, fmt.Errorf("no image for linux/%s in %s", runtime.GOARCH, dir)
}
