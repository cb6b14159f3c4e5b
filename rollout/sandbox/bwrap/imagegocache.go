package bwrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd/rollout"
)

// GoCacheDir is GOCACHE in an image sandbox of a Go repository, where the image's
// Env sets none, or one that cannot be mounted (see the package documentation, Go
// repositories).
const GoCacheDir = "/var/cache/agenticopd-go"

// goWarmCommand compiles, in a sandbox of the pristine image, what `go test ./...`
// compiles there (the packages, their dependencies, the standard library's among
// them, the test binaries, vet's inputs), and runs none of it: /bin/true stands in
// for each test binary, and -count=1 keeps any test result out of the cache.
const goWarmCommand = "go build ./... ; go test -count=1 -run '^$' -exec /bin/true ./..."

// Where an image sandbox keeps its Go build cache, in the sandbox's directory: the
// mount point bubblewrap binds at GOCACHE, and (with Config.DisableWorkspaceMount) a
// tmpfs for the overlay's upper layer. Inside the layers' tmpfs: the upper layer and
// the overlay's work directory.
const (
	imageGoCache      = "gocache"
	imageGoCacheLayer = "gocache-layer"
	goCacheUpper      = "gocache"
	goCacheWork       = "gocache-work"
)

// goWarmMtime is the modification time of every file of a warm cache, in seconds
// since 1970 (2200-01-01): far enough ahead that the go command never trims an entry
// (it removes those unused for five days) nor tries to refresh one (it touches
// those older than an hour).
const goWarmMtime = 7258118400

// goCache is the Go build cache of an image sandbox.
type goCache struct {
	// path is GOCACHE inside the sandbox.
	path string
	// lower is the warm cache on the host: the overlay's lower layer, never
	// written; "" for none (an empty lower layer).
	lower string
	// stage is set in the sandbox that warms the cache only: the host directory
	// bound writable at path, sealed and renamed into place when it is done.
	stage string
}

// prepareGoCache gives img a Go build cache when it is a Go repository's image
// (a go command on its PATH, a go.mod in the working directory) and the factory
// has not been told otherwise: GOCACHE in its environment, and, where the image
// source gives a CacheDir, the cache warmed once per image and working directory
// below the sandbox's own layer. A failure to warm is logged and leaves the
// sandbox with a cache of its own only; the end of ctx is an error.
func (f *Factory) prepareGoCache(ctx context.Context, img *imageState) error {
	if f.cfg.DisableGoBuildCache {
		return nil
	}
	p, ok := goCachePath(img)
	if !ok {
		return nil
	}
	gc := &goCache{path: p}
	img.env = setEnv(img.env, "GOCACHE", p)
	if img.root.CacheDir != "" {
		lower, err := f.warmGoCache(ctx, img, p)
		var before failedBefore
		switch {
		case err != nil && ctx.Err() != nil:
			return err
		case errors.As(err, &before):
			// Said when it failed.
		case err != nil:
			f.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox: the image's Go build cache could not be warmed: its sandboxes compile from an empty cache",
				slog.String("image_root", img.root.Dir), slog.String("work_dir", img.workDir), slog.Any("error", err))
		default:
			gc.lower = lower
		}
	}
	img.goCache = gc
	return nil
}

// goCachePath reports whether img is a Go repository's image, and its GOCACHE: the
// image's own when it can be mounted, else [GoCacheDir].
func goCachePath(img *imageState) (string, bool) {
	r, err := os.OpenRoot(img.root.Dir)
	if err != nil {
		return "", false
	}
	defer r.Close()
	if fi, err := r.Lstat(path.Join(img.workDir[1:], "go.mod")); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	found := false
	for _, dir := range strings.Split(envValue(img.env, "PATH"), ":") {
		if !path.IsAbs(dir) || path.Clean(dir) == "/" {
			continue
		}
		if fi, err := r.Lstat(path.Join(path.Clean(dir)[1:], "go")); err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			found = true
			break
		}
	}
	if !found {
		return "", false
	}
	if p := envValue(img.env, "GOCACHE"); mountableCache(p, img.workDir) {
		return path.Clean(p), true
	}
	if mountableCache(GoCacheDir, img.workDir) {
		return GoCacheDir, true
	}
	return "", false
}

// mountableCache reports whether a cache can be mounted at p: an absolute path, not
// one the sandbox mounts itself (see checkWorkDir), apart from the working
// directory (a cache inside it would be in the agent's diff).
func mountableCache(p, workDir string) bool {
	if !path.IsAbs(p) || checkWorkDir(p) != nil {
		return false
	}
	p = path.Clean(p)
	return p != workDir && !strings.HasPrefix(p, workDir+"/") && !strings.HasPrefix(workDir, p+"/")
}

// envValue is the value of k in env ("K=V" entries, the last one wins).
func envValue(env []string, k string) string {
	v := ""
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && name == k {
			v = val
		}
	}
	return v
}

// setEnv returns env with k set to v: its entries of k dropped, k=v appended.
func setEnv(env []string, k, v string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != k {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

// warmGoCache returns the warm Go build cache of img's root and working directory,
// making it first if no process has: under an exclusive flock in the root's
// CacheDir, a sandbox of the pristine image (no agent has had one yet: every
// sandbox of the image waits here first) runs [goWarmCommand] with GOCACHE bound to
// a new directory, which is then sealed (sealGoCache) and renamed into place. What a
// failed or timed-out warm-up compiled is kept: the go command writes an entry's
// index only after its output, and checks the output's size when it reads it. A
// failure to make the cache is remembered, so this factory does not try again.
func (f *Factory) warmGoCache(ctx context.Context, img *imageState, gocache string) (string, error) {
	sum := sha256.Sum256([]byte(img.workDir + "\x00" + gocache))
	name := "go-" + hex.EncodeToString(sum[:8])
	final := filepath.Join(img.root.CacheDir, name)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	if v, ok := f.goWarmErrs.Load(final); ok {
		return "", failedBefore{v.(error)}
	}
	lower, err := f.warmGoCacheLocked(ctx, img, gocache, final)
	if err != nil && ctx.Err() == nil {
		f.goWarmErrs.Store(final, err)
	}
	return lower, err
}

// failedBefore is warmGoCache's error for a cache this factory failed to warm
// before.
type failedBefore struct{ err error }

func (e failedBefore) Error() string { return e.err.Error() }

func (f *Factory) warmGoCacheLocked(ctx context.Context, img *imageState, gocache, final string) (string, error) {
	if err := os.MkdirAll(img.root.CacheDir, 0o700); err != nil {
		return "", err
	}
	lock, err := flockFile(ctx, final+".lock")
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return final, nil // another process warmed it while this one waited
	}
	// Holding the lock, no warm-up of this cache runs: what is left was a dead one's.
	if stale, err := filepath.Glob(final + ".tmp-*"); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	stage, err := os.MkdirTemp(img.root.CacheDir, filepath.Base(final)+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage) // a no-op once renamed
	if err := os.Chown(stage, f.uid(), f.gid()); err != nil {
		return "", err
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	res, err := f.runWarmUp(ctx, img, gocache, stage)
	if err != nil {
		return "", err
	}
	if err := sealGoCache(stage); err != nil {
		return "", fmt.Errorf("sealing the warm cache: %w", err)
	}
	if err := os.Rename(stage, final); err != nil {
		return "", err
	}
	level := slog.LevelInfo
	if res.ExitCode != 0 {
		level = slog.LevelWarn // still a cache of what compiled
	}
	f.cfg.Logger.LogAttrs(ctx, level, "sandbox: Go build cache warmed",
		slog.String("image_root", img.root.Dir), slog.String("work_dir", img.workDir),
		slog.Float64("seconds", time.Since(start).Seconds()), slog.Int("exit_code", res.ExitCode),
		slog.Bool("timed_out", res.TimedOut), slog.String("stderr", string(tailBytes(res.Stderr, 2000))))
	return final, nil
}

// runWarmUp runs [goWarmCommand] in a sandbox of the pristine image, without the
// network, with stage bound writable at GOCACHE.
func (f *Factory) runWarmUp(ctx context.Context, img *imageState, gocache, stage string) (Result, error) {
	w := &imageState{root: img.root, workDir: img.workDir, uid: img.uid, gid: img.gid, home: img.home,
		env: img.env, goCache: &goCache{path: gocache, stage: stage}}
	w.root.Release = nil // the root is the caller's, released with its sandbox
	sb, err := f.create(ctx, w)
	if err != nil {
		return Result{}, err
	}
	defer sb.Close()
	if err := f.loginEnv(ctx, sb); err != nil {
		return Result{}, err
	}
	w.env = setEnv(w.env, "GOCACHE", gocache)
	res, err := sb.RunDetailed(ctx, rollout.Command{Shell: goWarmCommand, Timeout: f.cfg.MaxTimeout})
	if err != nil {
		return Result{}, fmt.Errorf("the warm-up command: %w", err)
	}
	if err := sb.Close(); err != nil { // every process of it is gone before the seal
		return Result{}, err
	}
	return res, nil
}

func tailBytes(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// goCacheDirs makes in base a Go build cache's upper layer and work directory, the
// upper layer holding the directories of the warm cache lower ("" for none), owned
// by uid and gid.
func goCacheDirs(base, lower string, uid, gid int) error {
	upper, work := filepath.Join(base, goCacheUpper), filepath.Join(base, goCacheWork)
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if lower != "" {
		ents, err := os.ReadDir(lower)
		if err != nil {
			return fmt.Errorf("the warm Go build cache: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				p := filepath.Join(upper, e.Name())
				if err := os.Mkdir(p, 0o755); err != nil {
					return err
				}
				if err := os.Chown(p, uid, gid); err != nil {
					return err
				}
			}
		}
	}
	return os.Chown(upper, uid, gid)
}

// sealGoCache makes the directory a warm-up wrote a cache no sandbox can change:
// everything the library's (root's), directories 0755, files 0444 with
// goWarmMtime; anything but a regular file or a directory removed. It works
// through an [os.Root], so no symlink leads it outside.
func sealGoCache(dir string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	var walk func(rel string) error
	walk = func(rel string) error {
		d, err := r.Open(rel)
		if err != nil {
			return err
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := path.Join(rel, e.Name())
			fi, err := r.Lstat(p)
			if err != nil {
				return err
			}
			switch {
			case fi.IsDir():
				if err := walk(p); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if err := sealEntry(r, p, 0o444); err != nil {
					return err
				}
				if err := r.Chtimes(p, time.Unix(goWarmMtime, 0), time.Unix(goWarmMtime, 0)); err != nil {
					return err
				}
			default:
				if err := r.Remove(p); err != nil {
					return err
				}
			}
		}
		return sealEntry(r, rel, 0o755)
	}
	return walk(".")
}

func sealEntry(r *os.Root, p string, mode fs.FileMode) error {
	// Without root the files stay the library's uid's, which is the code's too:
	// they are safe as an overlay's lower layer, which no sandbox writes.
	if os.Geteuid() == 0 {
		if err := r.Lchown(p, 0, 0); err != nil {
			return err
		}
	}
	return r.Chmod(p, mode)
}

// flockFile opens file (creating it) and takes an exclusive flock on it, waiting
// until it can or ctx ends. Closing the file releases the lock; so does the death
// of the process.
func flockFile(ctx context.Context, file string) (*os.File, error) {
	fl, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(fl.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return fl, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			fl.Close()
			return nil, fmt.Errorf("flock %s: %w", file, err)
		}
		select {
		case <-ctx.Done():
			fl.Close()
			return nil, fmt.Errorf("waiting for the warm-up of another sandbox: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mountGoCache mounts the sandbox's Go build cache at dir/gocache, which bubblewrap
// binds at GOCACHE. The warm-up sandbox gets its stage directory itself. Every other
// sandbox gets an overlay: the warm cache (or an empty directory) below, never
// written, and an upper layer of its own on the layers' tmpfs (with
// Config.DisableWorkspaceMount, a tmpfs of its own of Config.DiskQuota bytes), so
// what its commands write there counts in its storage bound and dies with it. The
// upper layer holds the warm cache's directories, owned by the sandbox uid, so that
// the go command can add entries beside the warm ones; the warm files stay root's
// and read-only (the code has no capability to override that), so it cannot touch
// them: changing them at all means replacing them in its own layer.
func (f *Factory) mountGoCache(dir string, img *imageState, layers string, tmpfs bool) error {
	gc := img.goCache
	target := filepath.Join(dir, imageGoCache)
	if err := os.Mkdir(target, 0o755); err != nil {
		return err
	}
	if gc.stage != "" {
		if err := unix.Mount(gc.stage, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the Go build cache being warmed: %w", err)
		}
		return nil
	}
	base := layers
	if !tmpfs && f.cfg.DiskQuota > 0 {
		base = filepath.Join(dir, imageGoCacheLayer)
		if err := os.Mkdir(base, 0o755); err != nil {
			return err
		}
		opts := "mode=0755,nr_inodes=" + strconv.Itoa(MaxWorkspaceEntries) + ",size=" + strconv.FormatInt(f.cfg.DiskQuota, 10)
		if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting the Go build cache's tmpfs: %w", err)
		}
	}
	if err := goCacheDirs(base, gc.lower, f.uid(), f.gid()); err != nil {
		return err
	}
	upper, work := filepath.Join(base, goCacheUpper), filepath.Join(base, goCacheWork)
	lower := filepath.Join(layers, "empty")
	if gc.lower != "" {
		lower = gc.lower
	}
	if err := mountOverlay(target, lower, upper, work); err != nil {
		return fmt.Errorf("the Go build cache: %w", err)
	}
	return nil
}
