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

// BenchmarkRootCached asks a cache for an image it holds on disk, as a second
// rollout on the same image does: the tag resolved at the registry (one manifest
// request), no layer fetched, nothing unpacked (checked by the cache's counter).
//
//	go test -run '^$' -bench BenchmarkRootCached -benchtime 200x ./images
func BenchmarkRootCached(b *testing.B) {
	ref := imagestest.SWERef(b)
	c := newCache(b, images.CacheConfig{})
	r, err := c.Root(context.Background(), ref)
	require.NoError(b, err)
	r.Release()
	b.ResetTimer()
	for b.Loop() {
		r, err := c.Root(context.Background(), ref)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	b.StopTimer()
	s := c.Stats()
	if s.Unpacks != 1 {
		b.Fatalf("stats %+v: the cached image was unpacked again", s)
	}
	b.ReportMetric(float64(s.Hits), "hits")
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
