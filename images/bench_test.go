package images_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
)

// BenchmarkUnpack pulls the repository test image from the loopback registry and
// unpacks it into an empty cache, each iteration: download, gunzip, tar, writes.
// MB/s counts the unpacked root's file bytes.
//
//	go test -run '^$' -bench BenchmarkUnpack -benchtime 3x ./images
func BenchmarkUnpack(b *testing.B) {
	ref := imagestest.SWERef(b)
	c := newCache(b, images.CacheConfig{})
	r, err := c.Root(context.Background(), ref)
	require.NoError(b, err)
	b.SetBytes(fileBytes(b, r.Dir))
	r.Release()
	b.ResetTimer()
	for b.Loop() {
		c := newCache(b, images.CacheConfig{})
		r, err := c.Root(context.Background(), ref)
		require.NoError(b, err)
		r.Release()
		if c.Stats().Unpacks != 1 {
			b.Fatalf("stats %+v: want one unpack", c.Stats())
		}
	}
}

// BenchmarkRootCached asks for an image already on disk, as a second rollout on
// the same image does, and checks with the caches' counters that nothing was
// unpacked again: "same-cache" through the Cache that unpacked it (the reference
// already resolved: no request at all), "new-cache" through a new Cache on the same
// directory each time, as another process would (one manifest request to the
// loopback registry, the lock, meta.json).
//
//	go test -run '^$' -bench BenchmarkRootCached -benchtime 200x ./images
func BenchmarkRootCached(b *testing.B) {
	ref := imagestest.SWERef(b)
	first := newCache(b, images.CacheConfig{})
	r, err := first.Root(context.Background(), ref)
	require.NoError(b, err)
	r.Release()
	b.Run("same-cache", func(b *testing.B) {
		for b.Loop() {
			r, err := first.Root(context.Background(), ref)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
		}
	})
	b.Run("new-cache", func(b *testing.B) {
		var unpacks int64
		for b.Loop() {
			c, err := images.NewCache(images.CacheConfig{Dir: first.Dir()})
			if err != nil {
				b.Fatal(err)
			}
			r, err := c.Root(context.Background(), ref)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
			unpacks += c.Stats().Unpacks
		}
		if unpacks != 0 {
			b.Fatalf("%d unpacks of an image on disk", unpacks)
		}
	})
	if s := first.Stats(); s.Unpacks != 1 {
		b.Fatalf("stats %+v: the cached image was unpacked again", s)
	}
}

// fileBytes adds up the sizes of the regular files under dir.
func fileBytes(b *testing.B, dir string) int64 {
	var n int64
	require.NoError(b, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	}))
	return n
}
