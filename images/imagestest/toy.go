package imagestest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/agentic-opd/agenticopd/internal/testimage"
	"github.com/agentic-opd/agenticopd/tasks"
)

// ToyTag is the tag of the toy repository's image in the layout [WriteToyLayout]
// writes.
const ToyTag = "swe-toy"

// WriteToyLayout builds the toy repository's image, the one [SWERef] serves, and
// writes it as an OCI image layout into dir (created if missing; an image already
// there is kept beside it). It returns the reference package images reads it by,
// "oci-layout:DIR:swe-toy" with dir made absolute, for [ToyTasks] or a task's
// Repo.Image. It needs no registry and no network once the root is built.
//
// The image is the root file system internal/testimage builds (Debian 12 with
// python3, pytest and git) and the toy repository of testdata/swe at /testbed. That
// root is built once per machine, with mmdebstrap from the Debian mirror in apt's
// sources (as root: mmdebstrap's own requirement; about half a minute), and cached
// under /var/tmp/agenticopd-testimage ($AGENTICOPD_TESTIMAGE_DIR overrides it); the
// error says what to install when mmdebstrap is missing. Packing the image takes a
// few seconds of CPU.
func WriteToyLayout(ctx context.Context, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	base, err := testimage.Ensure(ctx, testimage.CacheBase(), testimage.Bookworm)
	if err != nil {
		return "", fmt.Errorf("imagestest: the toy image's root: %w", err)
	}
	repo, err := sweRepoLayer()
	if err != nil {
		return "", fmt.Errorf("imagestest: the toy repository: %w", err)
	}
	defer os.RemoveAll(repo)
	img, err := image(SWEConfig(), base, repo)
	if err != nil {
		return "", fmt.Errorf("imagestest: packing the toy image: %w", err)
	}
	if err := writeLayout(abs, img); err != nil {
		return "", fmt.Errorf("imagestest: writing the OCI layout %s: %w", abs, err)
	}
	return "oci-layout:" + abs + ":" + ToyTag, nil
}

// writeLayout appends img to the layout at dir (made when missing) as ToyTag.
func writeLayout(dir string, img v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return err
		}
	}
	return p.ReplaceImage(img, func(d v1.Descriptor) bool { return d.Annotations["org.opencontainers.image.ref.name"] == ToyTag },
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ToyTag}))
}

// ToyTasks returns the toy repository's tasks (testdata/swe/tasks.jsonl: "add",
// "word_count" and "clamp", SWE-bench rows with their own test command), each with
// image as its Repo.Image: a reference to the toy image, such as [WriteToyLayout]'s
// or [SWERef]'s.
func ToyTasks(image string) ([]tasks.Task, error) {
	ts, err := tasks.LoadSWE(filepath.Join(moduleRoot(), "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	if err != nil {
		return nil, err
	}
	for i := range ts {
		ts[i].Repo.Image = image
	}
	return ts, nil
}
