package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The reference prefixes of images on the local disk.
const (
	// OCILayoutPrefix starts a reference to an image in an OCI image layout
	// directory: "oci-layout:/path/to/layout", optionally followed by ":tag" (the
	// org.opencontainers.image.ref.name annotation in index.json) or "@sha256:…" (a
	// manifest or index digest).
	OCILayoutPrefix = "oci-layout:"
	// DockerArchivePrefix starts a reference to an image in a `docker save`
	// tarball: "docker-archive:/path/to/file.tar", optionally followed by
	// ":repo:tag" when the tarball holds more than one image.
	DockerArchivePrefix = "docker-archive:"
)

// ErrBadRef is wrapped by every error about a reference that cannot name an image.
var ErrBadRef = errors.New("images: bad image reference")

// open returns the image ref names, for the cache's platform.
func (c *Cache) open(ctx context.Context, ref string) (v1.Image, error) {
	switch {
	case strings.HasPrefix(ref, OCILayoutPrefix):
		return c.openLayout(strings.TrimPrefix(ref, OCILayoutPrefix))
	case strings.HasPrefix(ref, DockerArchivePrefix):
		return openArchive(strings.TrimPrefix(ref, DockerArchivePrefix))
	}
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		// Accept what docker accepts ("ubuntu", "ubuntu:22.04"), then refuse the rest.
		r, err = name.ParseReference(ref)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v (want registry/repo:tag, registry/repo@sha256:…, %s/path[:tag|@digest] or %s/file.tar[:repo:tag])",
				ErrBadRef, ref, err, OCILayoutPrefix, DockerArchivePrefix)
		}
	}
	img, err := remote.Image(r,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(c.keychain),
		remote.WithPlatform(*c.platform),
		remote.WithTransport(c.transport))
	if err != nil {
		return nil, fmt.Errorf("images: pulling %s: %w", ref, err)
	}
	return img, nil
}

// openLayout reads "path[:tag|@digest]" from an OCI layout.
func (c *Cache) openLayout(s string) (v1.Image, error) {
	dir, sel := s, ""
	var digest v1.Hash
	if i := strings.LastIndex(s, "@"); i > 0 {
		h, err := v1.NewHash(s[i+1:])
		if err != nil {
			return nil, fmt.Errorf("%w %q: digest: %v", ErrBadRef, OCILayoutPrefix+s, err)
		}
		dir, digest = s[:i], h
	} else if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		dir, sel = s[:i], s[i+1:]
	}
	if dir == "" {
		return nil, fmt.Errorf("%w %q: no layout path", ErrBadRef, OCILayoutPrefix+s)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("images: OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("images: OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("images: OCI layout %s: index.json: %w", dir, err)
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		switch {
		case digest != (v1.Hash{}):
			if d.Digest == digest {
				found = append(found, d)
			}
		case sel != "":
			if d.Annotations["org.opencontainers.image.ref.name"] == sel {
				found = append(found, d)
			}
		default:
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0 && digest != (v1.Hash{}):
		// A digest of an image inside a nested index, or not listed at the top.
		if img, err := p.Image(digest); err == nil {
			return img, nil
		}
		return nil, fmt.Errorf("images: OCI layout %s holds no manifest %s", dir, digest)
	case len(found) == 0 && sel != "":
		return nil, fmt.Errorf("images: OCI layout %s has no image tagged %q", dir, sel)
	case len(found) == 0:
		return nil, fmt.Errorf("images: OCI layout %s holds no image", dir)
	case len(found) > 1:
		return nil, fmt.Errorf("images: OCI layout %s holds %d images: name one with :tag or @digest", dir, len(found))
	}
	d := found[0]
	if d.MediaType.IsIndex() {
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("images: OCI layout %s: %w", dir, err)
		}
		return c.fromIndex(child, dir)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("images: OCI layout %s: %w", dir, err)
	}
	return img, nil
}

// fromIndex picks the image for the cache's platform out of a multi-platform index.
func (c *Cache) fromIndex(idx v1.ImageIndex, where string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(*c.platform) && d.MediaType.IsImage() {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("images: %s has no image for platform %s", where, c.platform)
}

// openArchive reads "file.tar[:repo:tag]" written by `docker save`.
func openArchive(s string) (v1.Image, error) {
	// The file is the whole string if it exists, else the shortest prefix ending
	// before a ":" that is a file (a repository may hold "/" and ":").
	file, tagStr := s, ""
	if fi, err := os.Stat(s); err != nil || fi.IsDir() {
		for i := strings.Index(s, ":"); i >= 0; {
			if fi, err := os.Stat(s[:i]); err == nil && !fi.IsDir() {
				file, tagStr = s[:i], s[i+1:]
				break
			}
			j := strings.Index(s[i+1:], ":")
			if j < 0 {
				break
			}
			i += j + 1
		}
	}
	if file == "" {
		return nil, fmt.Errorf("%w %q: no file", ErrBadRef, DockerArchivePrefix+s)
	}
	var tag *name.Tag
	if tagStr != "" {
		t, err := name.NewTag(tagStr)
		if err != nil {
			return nil, fmt.Errorf("%w %q: tag %q: %v", ErrBadRef, DockerArchivePrefix+s, tagStr, err)
		}
		tag = &t
	}
	img, err := tarball.ImageFromPath(file, tag)
	if err != nil {
		return nil, fmt.Errorf("images: docker archive %s: %w", file, err)
	}
	return img, nil
}
