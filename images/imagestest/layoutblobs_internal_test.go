package imagestest

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// TestSWERegistryKeepsPushesOutOfTheLayout pushes an image of SWERef's layers and one
// more to SWERef's registry: it is served back whole, the shared layout on disk gains
// no file, and a blob the registry never had is not found.
func TestSWERegistryKeepsPushesOutOfTheLayout(t *testing.T) {
	dir, err := sweLayout(context.Background(), testimage.Bookworm)
	require.NoError(t, err)
	files := func() []string {
		var names []string
		require.NoError(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			names = append(names, p)
			return err
		}))
		return names
	}
	before := files()

	ref, err := name.ParseReference(SWERef(t))
	require.NoError(t, err)
	img, err := remote.Image(ref)
	require.NoError(t, err)
	extra, err := random.Layer(4096, "application/vnd.oci.image.layer.v1.tar")
	require.NoError(t, err)
	img, err = mutate.AppendLayers(img, extra)
	require.NoError(t, err)
	other, err := name.NewTag(ref.Context().RegistryStr() + "/other:latest")
	require.NoError(t, err)
	require.NoError(t, remote.Write(other, img))

	back, err := remote.Image(other)
	require.NoError(t, err)
	layers, err := back.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 3)
	want, err := extra.Digest()
	require.NoError(t, err)
	got, err := layers[2].Digest()
	require.NoError(t, err)
	require.Equal(t, want, got)
	rc, err := layers[2].Compressed()
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	size, err := extra.Size()
	require.NoError(t, err)
	require.Equal(t, size, n)

	require.Equal(t, before, files(), "a push reached the shared layout")

	missing, err := random.Layer(64, "application/vnd.oci.image.layer.v1.tar")
	require.NoError(t, err)
	d, err := missing.Digest()
	require.NoError(t, err)
	l, err := remote.Layer(ref.Context().Digest(d.String()))
	if err == nil {
		_, err = l.Compressed()
	}
	require.ErrorContains(t, err, "BLOB_UNKNOWN")
}
