package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// Defaults of [CacheConfig].
const (
	// DefaultDir is CacheConfig.Dir's default: on disk, kept across reboots.
	DefaultDir = "/var/tmp/agenticopd-images"
	// DefaultMaxBytes is CacheConfig.MaxBytes's default: 32 GiB of unpacked roots.
	DefaultMaxBytes = 32 << 30
)

// CacheConfig configures a [Cache]. The zero value of every field is a documented
// default.
type CacheConfig struct {
	// Dir holds the cache; [DefaultDir] if empty. Processes that share a Dir share
	// its images, and coordinate through locks in it.
	Dir string
	// MaxBytes bounds the unpacked roots on disk (file contents and directories, as
	// du counts them): after an image is unpacked, and when one is released while the
	// cache is over its bound, the least recently used images no process uses are
	// removed until the cache fits. Images in use are never removed, so the cache can
	// stay over the bound while they are. An image that alone unpacks to more is
	// refused ([ErrTooLarge]). Zero means [DefaultMaxBytes]; negative, no bound.
	MaxBytes int64
	// Keychain gives registry credentials; nil means authn.DefaultKeychain (the
	// docker config's credentials and helpers).
	Keychain authn.Keychain
	// Logger receives a line per unpack and per eviction; nil logs nothing.
	Logger *slog.Logger
	// Platform picks the image out of a multi-platform index; nil means linux and
	// the architecture this program runs on.
	Platform *v1.Platform
	// Transport carries registry requests; nil means remote.DefaultTransport.
	Transport http.RoundTripper
	// UID and GID own the unpacked trees when the process runs as root: the sandbox's
	// uid, so that it can read every file of the image (an image's 0600 and 0700
	// entries stay readable by their owner). Zero means [bwrap.DefaultUID] and
	// [bwrap.DefaultGID], the sandbox's own defaults. Without root the trees belong
	// to the process's uid, which is also the sandbox's.
	UID, GID int
}

// ErrTooLarge is wrapped by Root when an image unpacks to more than CacheConfig.MaxBytes.
var ErrTooLarge = errors.New("images: image larger than the cache's MaxBytes")

// Stats counts what a [Cache] has done since it was made.
type Stats struct {
	Unpacks   int64 // images unpacked by this Cache
	Hits      int64 // Root calls served from a root already on disk, no unpacking
	Evictions int64 // images this Cache removed to hold MaxBytes
}

// Cache unpacks images into a content-addressed cache on disk and hands out their
// roots. It implements [bwrap.RootSource]. A Cache is safe for concurrent use,
// and several processes may share its directory.
type Cache struct {
	dir       string
	maxBytes  int64
	keychain  authn.Keychain
	log       *slog.Logger
	platform  *v1.Platform
	transport http.RoundTripper
	chown     bool
	uid, gid  int

	checkDir sync.Once
	dirErr   error

	mu        sync.Mutex
	inUse     map[string]*entry // by image id (config digest hex)
	resolved  map[string]string // reference → image id, once resolved
	overBound bool              // the last eviction could not reach MaxBytes

	unpacks, hits, evictions atomic.Int64
}

// entry is an image root this process uses: its shared lock is held while refs > 0.
type entry struct {
	refs int
	lock *os.File
	meta meta
	dir  string
}

// meta is what the cache keeps beside a root (meta.json).
type meta struct {
	Ref        string    `json:"ref"`
	Image      string    `json:"image"` // the config digest, the image's id
	Env        []string  `json:"env"`
	WorkingDir string    `json:"working_dir"`
	User       string    `json:"user"`
	Bytes      int64     `json:"bytes"`
	Skipped    int       `json:"skipped_special_files"`
	Unpacked   time.Time `json:"unpacked"`
}

// NewCache returns a cache configured by cfg. It does no I/O: the directory is made
// and checked by the first Root.
func NewCache(cfg CacheConfig) (*Cache, error) {
	c := &Cache{dir: cfg.Dir, maxBytes: cfg.MaxBytes, keychain: cfg.Keychain, log: cfg.Logger,
		platform: cfg.Platform, transport: cfg.Transport, uid: cfg.UID, gid: cfg.GID,
		inUse: map[string]*entry{}, resolved: map[string]string{}}
	if c.dir == "" {
		c.dir = DefaultDir
	}
	if !filepath.IsAbs(c.dir) {
		abs, err := filepath.Abs(c.dir)
		if err != nil {
			return nil, fmt.Errorf("images: Dir %q: %w", c.dir, err)
		}
		c.dir = abs
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	if c.keychain == nil {
		c.keychain = authn.DefaultKeychain
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.platform == nil {
		c.platform = &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	if c.transport == nil {
		c.transport = remote.DefaultTransport
	}
	if cfg.UID < 0 || cfg.GID < 0 {
		return nil, errors.New("images: UID and GID must not be negative")
	}
	if c.uid == 0 {
		c.uid = bwrap.DefaultUID
	}
	if c.gid == 0 {
		c.gid = bwrap.DefaultGID
	}
	c.chown = os.Geteuid() == 0
	return c, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Stats returns what the cache has done so far.
func (c *Cache) Stats() Stats {
	return Stats{Unpacks: c.unpacks.Load(), Hits: c.hits.Load(), Evictions: c.evictions.Load()}
}

// Root returns the root filesystem of the image ref names, unpacking it first if no
// process has. ref is "registry/repo:tag", "registry/repo@sha256:…",
// "oci-layout:/path[:tag|@digest]" or "docker-archive:/file.tar[:repo:tag]". A
// reference is resolved to its image once per Cache (for a registry, one manifest
// request); later calls, while the image stays on disk, make no request at all.
// The caller calls the root's Release once when no sandbox uses it any longer;
// until then no process evicts it.
func (c *Cache) Root(ctx context.Context, ref string) (bwrap.ImageRoot, error) {
	if err := c.ensureDir(); err != nil {
		return bwrap.ImageRoot{}, err
	}
	c.mu.Lock()
	key := c.resolved[ref]
	c.mu.Unlock()
	if key != "" {
		e, err := c.acquire(ctx, key, ref, nil)
		if err == nil {
			return c.rootOf(e, key), nil
		}
		if !errors.Is(err, errNotOnDisk) {
			return bwrap.ImageRoot{}, err
		}
		// Evicted since: resolve the reference again.
	}
	img, err := c.open(ctx, ref)
	if err != nil {
		return bwrap.ImageRoot{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return bwrap.ImageRoot{}, fmt.Errorf("images: %s: config digest: %w", ref, err)
	}
	key = id.Hex
	e, err := c.acquire(ctx, key, ref, img)
	if err != nil {
		return bwrap.ImageRoot{}, err
	}
	c.mu.Lock()
	c.resolved[ref] = key
	c.mu.Unlock()
	return c.rootOf(e, key), nil
}

// errNotOnDisk is acquire's answer, without an image to unpack, for a root that is
// not on disk.
var errNotOnDisk = errors.New("images: not on disk")

// rootOf is the ImageRoot of entry e, whose Release drops one reference to it.
func (c *Cache) rootOf(e *entry, key string) bwrap.ImageRoot {
	var once sync.Once
	return bwrap.ImageRoot{
		Dir:        filepath.Join(e.dir, "rootfs"),
		Env:        append([]string(nil), e.meta.Env...),
		WorkingDir: e.meta.WorkingDir,
		User:       e.meta.User,
		CacheDir:   filepath.Join(e.dir, "derived"),
		Release:    func() { once.Do(func() { c.release(key) }) },
	}
}

// ensureDir makes the cache's directories, once.
func (c *Cache) ensureDir() error {
	c.checkDir.Do(func() {
		for _, d := range []string{c.dir, c.path("roots"), c.path("locks"), c.path("tmp")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				c.dirErr = fmt.Errorf("images: cache directory: %w", err)
				return
			}
		}
	})
	return c.dirErr
}

func (c *Cache) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// acquire returns the entry for image key, holding a shared lock on it, unpacking
// the image first if it is not on disk.
func (c *Cache) acquire(ctx context.Context, key, ref string, img v1.Image) (*entry, error) {
	c.mu.Lock()
	if e := c.inUse[key]; e != nil {
		e.refs++
		c.mu.Unlock()
		c.hits.Add(1)
		c.touch(key)
		return e, nil
	}
	c.mu.Unlock()

	lock, err := os.OpenFile(c.path("locks", key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("images: lock: %w", err)
	}
	m, unpacked, err := c.lockRoot(ctx, lock, key, ref, img)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if !unpacked {
		c.hits.Add(1)
	}
	c.mu.Lock()
	e := c.inUse[key]
	if e != nil {
		e.refs++
		lock.Close() // another goroutine's lock already holds it for this process
	} else {
		e = &entry{refs: 1, lock: lock, meta: m, dir: c.path("roots", key)}
		c.inUse[key] = e
	}
	c.mu.Unlock()
	c.touch(key)
	if unpacked {
		c.evict(key)
	}
	return e, nil
}

// lockRoot takes a shared lock on key's use lock with the root on disk, unpacking
// it first if it is missing. No lock is ever converted: the shared use lock is held
// from the start (so no evictor removes the root once it is there), and an unpack
// is serialized by a second, exclusive lock of its own. Waiting to convert a shared
// lock into an exclusive one would wait forever for the holders of the other
// shared locks, which keep them while they use the image.
func (c *Cache) lockRoot(ctx context.Context, lock *os.File, key, ref string, img v1.Image) (meta, bool, error) {
	if err := flock(ctx, lock, lockShared); err != nil {
		return meta{}, false, err
	}
	if m, err := c.readMeta(key); err == nil {
		return m, false, nil
	}
	if img == nil {
		return meta{}, false, errNotOnDisk
	}
	ul, err := os.OpenFile(c.path("locks", key+".unpack"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return meta{}, false, fmt.Errorf("images: lock: %w", err)
	}
	defer ul.Close() // releases the unpack lock
	if err := flock(ctx, ul, lockExclusive); err != nil {
		return meta{}, false, err
	}
	if m, err := c.readMeta(key); err == nil {
		return m, false, nil // another unpacked it while this one waited
	}
	if err := c.unpack(ctx, key, ref, img); err != nil {
		return meta{}, false, err
	}
	m, err := c.readMeta(key)
	return m, true, err
}

func (c *Cache) readMeta(key string) (meta, error) {
	var m meta
	b, err := os.ReadFile(c.path("roots", key, "meta.json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("images: %s: %w", c.path("roots", key, "meta.json"), err)
	}
	return m, nil
}

// touch records that key was used now (the mtime of its "used" file), for eviction
// by least recent use across processes.
func (c *Cache) touch(key string) {
	p := c.path("roots", key, "used")
	now := time.Now()
	if err := os.Chtimes(p, now, now); errors.Is(err, os.ErrNotExist) {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
}

// release drops one reference to key; the last one unlocks it.
func (c *Cache) release(key string) {
	c.mu.Lock()
	e := c.inUse[key]
	if e == nil {
		c.mu.Unlock()
		return
	}
	e.refs--
	last := e.refs == 0
	if last {
		delete(c.inUse, key)
		e.lock.Close()
	}
	over := c.overBound
	c.mu.Unlock()
	if last && over {
		c.evict("")
	}
}

// unpack writes image key's root into a temporary directory and renames it into
// place. The caller holds key's unpack lock, and its use lock shared.
func (c *Cache) unpack(ctx context.Context, key, ref string, img v1.Image) error {
	c.sweepTmp(key)
	start := time.Now()
	tmp, err := os.MkdirTemp(c.path("tmp"), key+".")
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	m, err := c.unpackInto(ctx, tmp, ref, img)
	if err != nil {
		return fmt.Errorf("images: unpacking %s: %w", ref, err)
	}
	m.Image = "sha256:" + key
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), b, 0o644); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := os.Rename(tmp, c.path("roots", key)); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	c.unpacks.Add(1)
	c.log.Info("images: unpacked", "ref", ref, "image", m.Image, "bytes", m.Bytes,
		"skipped_special_files", m.Skipped, "seconds", time.Since(start).Seconds())
	return nil
}

// unpackInto applies img's layers to dir/rootfs.
func (c *Cache) unpackInto(ctx context.Context, dir, ref string, img v1.Image) (meta, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return meta{}, fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return meta{}, fmt.Errorf("layers: %w", err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return meta{}, err
	}
	if c.chown {
		if err := os.Lchown(rootfs, c.uid, c.gid); err != nil {
			return meta{}, err
		}
	}
	r, err := os.OpenRoot(rootfs)
	if err != nil {
		return meta{}, err
	}
	defer r.Close()
	u := newUnpacker(r, c.chown, c.uid, c.gid, c.maxBytes)
	defer u.close()
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return meta{}, err
		}
		if err := c.applyLayer(ctx, u, l); err != nil {
			return meta{}, fmt.Errorf("layer %d of %d: %w", i+1, len(layers), err)
		}
	}
	if err := u.finish(); err != nil {
		return meta{}, err
	}
	n, err := du(rootfs)
	if err != nil {
		return meta{}, err
	}
	return meta{Ref: ref, Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
		Bytes: n, Skipped: u.skipped, Unpacked: time.Now().UTC()}, nil
}

func (c *Cache) applyLayer(ctx context.Context, u *unpacker, l v1.Layer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	err = u.layer(ctxReader{ctx, rc})
	if err != nil {
		return err
	}
	// Read to the end, so that a digest check at EOF (remote and layout layers
	// verify what they stream) runs.
	_, err = io.Copy(io.Discard, ctxReader{ctx, rc})
	return err
}

// ctxReader stops a long unpack when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
