package images_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestCacheDirTheSandboxCannotReach: as root, a cache under a directory the
// sandbox's uid cannot search is refused with what to do, before any pull.
func TestCacheDirTheSandboxCannotReach(t *testing.T) {
	if os.Geteuid() != 0 {
		// Without root the sandbox runs as this process's uid, which reaches its own
		// directories: there is nothing to refuse. Checked as root in ./test.sh.
		t.Log("not root: the cache and the sandbox share this uid")
		c := newCache(t, images.CacheConfig{Dir: filepath.Join(t.TempDir(), "c")})
		root(t, c, layoutRef(t, bigImage(t, 1, 10, "r")))
		return
	}
	closed := filepath.Join(reachableDir(t), "closed")
	require.NoError(t, os.Mkdir(closed, 0o700))
	c := newCache(t, images.CacheConfig{Dir: filepath.Join(closed, "cache")})
	_, err := c.Root(context.Background(), "oci-layout:/nonexistent")
	require.ErrorContains(t, err, "not searchable by the sandbox's uid 65534: chmod o+x")
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
	host := stallingRegistry(t, release)
	reg := host + "/stall/img:1"
	pushTo(t, reg, bigImage(t, 100, 4000, "s"))
	c := newCache(t, images.CacheConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// cancel once the unpack has begun
		for ctx.Err() == nil {
			m, _ := filepath.Glob(filepath.Join(c.Dir(), "tmp", "*", "rootfs", "d*"))
			if len(m) > 0 {
				cancel()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := c.Root(ctx, reg)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	<-done
	nothingLeft(t, c)
}
