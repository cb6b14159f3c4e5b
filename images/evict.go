package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// evict removes the least recently used images no process uses until the cache
// holds at most MaxBytes. keep (the image just unpacked) is never removed.
func (c *Cache) evict(keep string) {
	if c.maxBytes < 0 {
		return
	}
	type root struct {
		key   string
		bytes int64
		used  time.Time
	}
	ents, err := os.ReadDir(c.path("roots"))
	if err != nil {
		c.log.Warn("images: eviction: reading the cache", "err", err)
		return
	}
	var roots []root
	var total int64
	for _, de := range ents {
		key := de.Name()
		m, err := c.readMeta(key)
		if err != nil {
			continue // being renamed away, or not ours
		}
		r := root{key: key, bytes: m.Bytes, used: m.Unpacked}
		if fi, err := os.Stat(c.path("roots", key, "used")); err == nil {
			r.used = fi.ModTime()
		}
		roots = append(roots, r)
		total += m.Bytes
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].used.Before(roots[j].used) })
	for _, r := range roots {
		if total <= c.maxBytes {
			break
		}
		if r.key == keep {
			continue
		}
		c.mu.Lock()
		used := c.inUse[r.key] != nil
		c.mu.Unlock()
		if used || !c.remove(r.key) {
			continue
		}
		total -= r.bytes
		c.evictions.Add(1)
		c.log.Info("images: evicted", "image", "sha256:"+r.key, "bytes", r.bytes)
	}
	c.mu.Lock()
	c.overBound = total > c.maxBytes
	c.mu.Unlock()
	if total > c.maxBytes {
		c.log.Warn("images: cache over its bound: the images left are in use",
			"bytes", total, "max_bytes", c.maxBytes)
	}
	c.sweepTmp("")
}

// remove deletes key's root if no process holds its lock: it is renamed out of
// roots first (atomically, so a reader sees it whole or not at all), then removed.
func (c *Cache) remove(key string) bool {
	lock, err := os.OpenFile(c.path("locks", key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer lock.Close()
	if !tryLock(lock) {
		return false // in use by a process, or being unpacked
	}
	gone, err := os.MkdirTemp(c.path("tmp"), key+".evict.")
	if err != nil {
		return false
	}
	if err := os.Rename(c.path("roots", key), filepath.Join(gone, "root")); err != nil {
		os.Remove(gone)
		return false
	}
	unlock(lock)
	if err := os.RemoveAll(gone); err != nil {
		c.log.Warn("images: eviction: removing", "dir", gone, "err", err)
	}
	return true
}

// sweepTmp removes what unpacks and evictions that died left in tmp: the entries of
// images whose use lock no one holds (only = "": every image; else that image only,
// whose unpack lock the caller holds: no other unpack of it runs).
func (c *Cache) sweepTmp(only string) {
	ents, err := os.ReadDir(c.path("tmp"))
	if err != nil {
		return
	}
	for _, de := range ents {
		key, _, ok := strings.Cut(de.Name(), ".")
		if !ok || (only != "" && key != only) {
			continue
		}
		p := c.path("tmp", de.Name())
		if only != "" {
			os.RemoveAll(p)
			continue
		}
		lock, err := os.OpenFile(c.path("locks", key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		if tryLock(lock) {
			os.RemoveAll(p)
		}
		lock.Close()
	}
}

// du adds up the disk blocks of the tree at dir, counting each inode once.
func du(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			n += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n, err
}
