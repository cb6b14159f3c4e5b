package images_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
)

// TestImageOverTheBound: an image whose files alone pass MaxBytes (a layer that
// inflates, say) is refused while it unpacks, and nothing of it stays on disk.
func TestImageOverTheBound(t *testing.T) {
	c := newCache(t, images.CacheConfig{MaxBytes: 100 << 10})
	ref := layoutRef(t, bigImage(t, 30, 10<<10, "z")) // 300 KiB of files, 2 KiB gzipped
	_, err := c.Root(context.Background(), ref)
	require.ErrorIs(t, err, images.ErrTooLarge)
	roots, err := os.ReadDir(filepath.Join(c.Dir(), "roots"))
	require.NoError(t, err)
	require.Empty(t, roots)
	nothingLeft(t, c)
}

// TestNewCacheConfig refuses what cannot work, and fills the defaults.
func TestNewCacheConfig(t *testing.T) {
	_, err := images.NewCache(images.CacheConfig{UID: -1})
	require.ErrorContains(t, err, "UID and GID must not be negative")
	c, err := images.NewCache(images.CacheConfig{})
	require.NoError(t, err)
	require.Equal(t, images.DefaultDir, c.Dir())
}

// TestRootCanceled: a context that ends stops a pull that waits, with its error.
func TestRootCanceled(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	host, stalled := stallingRegistry(t, release)
	reg := host + "/stall/img:1"
	pushTo(t, reg, bigImage(t, 100, 4000, "s"))
	c := newCache(t, images.CacheConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		select { // cancel once the layer's download has stopped halfway
		case <-stalled:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := c.Root(ctx, reg)
	cancel() // in case Root returned first
	<-done
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	nothingLeft(t, c)
}
