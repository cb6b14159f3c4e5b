package bwrap

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentic-opd/agenticopd/rollout"
)

// ImageRoot is an unpacked image's root file system and the parts of its config a
// sandbox honours.
type ImageRoot struct {
	// Dir is the root file system on the host; sandboxes mount it read-only and never
	// write in it.
	Dir string
	// Env is the image config's Env, "K=V".
	Env []string
	// WorkingDir is the image config's WorkingDir.
	WorkingDir string
	// User is the image config's User.
	User string
	// CacheDir is a host directory that belongs to this root, for what sandboxes
	// derive from the pristine image and share (the warm Go build cache of a Go
	// repository's image, see the package documentation): the library makes it
	// (0700) and writes in it, under locks in it, across processes; no sandbox sees
	// it. It must be removed with the root (package images' Cache keeps it beside the
	// unpacked root). "" means nothing is shared between sandboxes of the image.
	CacheDir string
	// Release is called once when no sandbox uses the root any longer; it may be nil.
	Release func()
}

// RootSource gives the root file system of an image reference. Implementations must
// be safe for concurrent use. Each ImageRoot it returns is released (its Release
// called once) by whoever asked for it: [Factory.NewSandboxFor] releases the root
// when the sandbox closes, or at once when it fails.
type RootSource interface {
	Root(ctx context.Context, ref string) (ImageRoot, error)
}

// ErrNoImages is returned by [Factory.NewSandboxFor] for a spec that names an image
// when Config.Images is nil.
var ErrNoImages = errors.New("sandbox: the spec names an image but Config.Images is nil: set Config.Images to a RootSource (package images' Cache is one)")

// ErrImageUnsupported is returned by [Factory.NewSandboxFor] for a spec that names an
// image on an unconfined factory, and wrapped by the [*ProbeError] of [New] when
// Config.Images is set on a host that cannot run image sandboxes (without root: no
// user namespaces, or a kernel that refuses overlayfs in one; the error says which
// and what to do).
var ErrImageUnsupported = errors.New("sandbox: this host cannot run image sandboxes")

var _ rollout.SpecFactory = (*Factory)(nil)

// imageState is what an image sandbox adds to a [Sandbox].
type imageState struct {
	root    ImageRoot
	workDir string // absolute, inside the sandbox
	// uid and gid are the ids the code runs as inside (the image's User), home its
	// home directory.
	uid, gid, home string
	network        bool
	// copied is true when the workspace is a copy of the image's directory, not an
	// overlay of it.
	copied bool
	env    []string
	// goCache is the Go build cache of a Go repository's image (imagegocache.go);
	// nil for other images.
	goCache *goCache
	once    sync.Once
}

func (img *imageState) release() {
	img.once.Do(func() {
		if img.root.Release != nil {
			img.root.Release()
		}
	})
}

// NewSandboxFor implements [rollout.SpecFactory]. A spec without an image is a
// sandbox as [Factory.NewSandbox] makes it (its WorkDir must then be "" or
// [WorkspaceDir]), with the network when spec.Network is set. A spec with an image
// gets a sandbox over that image's root from Config.Images: the root read-only, the
// working directory (spec.WorkDir, else the image's WorkingDir, else
// [WorkspaceDir]) a writable copy-on-write view of the image's directory there, the
// image's Env, User, /etc/hosts and HOME (see the package documentation, Image
// sandboxes). The dynamic type of the result is [*Sandbox]; the caller closes it.
// Errors: [ErrNoImages], [ErrImageUnsupported], [ErrInvalidConfig] for a bad
// WorkDir, or the image source's error, wrapped.
func (f *Factory) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	if spec.Image == "" {
		if spec.WorkDir != "" && path.Clean(spec.WorkDir) != WorkspaceDir {
			return nil, configError("SandboxSpec.WorkDir " + spec.WorkDir + " needs an image; without one the workspace is " + WorkspaceDir)
		}
		sb, err := f.create(ctx, nil)
		if err != nil {
			return nil, err
		}
		sb.network = spec.Network
		return sb, nil
	}
	switch {
	case f.cfg.Unconfined:
		return nil, fmt.Errorf("%w: an unconfined factory runs none (image %s)", ErrImageUnsupported, spec.Image)
	case f.cfg.Images == nil:
		return nil, ErrNoImages
	}
	root, err := f.cfg.Images.Root(ctx, spec.Image)
	if err != nil {
		return nil, fmt.Errorf("sandbox: image %s: %w", spec.Image, err)
	}
	img := &imageState{root: root, network: spec.Network}
	sb, err := f.newImageSandbox(ctx, spec, img)
	if err != nil {
		img.release()
		return nil, err
	}
	return sb, nil
}

func (f *Factory) newImageSandbox(ctx context.Context, spec rollout.SandboxSpec, img *imageState) (*Sandbox, error) {
	if fi, err := os.Stat(img.root.Dir); err != nil || !fi.IsDir() || !filepath.IsAbs(img.root.Dir) {
		return nil, fmt.Errorf("sandbox: image %s: its root %q is not a directory", spec.Image, img.root.Dir)
	}
	wd := cmp.Or(spec.WorkDir, img.root.WorkingDir, WorkspaceDir)
	if err := checkWorkDir(wd); err != nil {
		return nil, err
	}
	img.workDir = path.Clean(wd)
	if err := img.resolveUser(); err != nil {
		return nil, fmt.Errorf("sandbox: image %s: %w", spec.Image, err)
	}
	img.env = imageEnv(img.root.Env, img.home)
	if err := f.prepareGoCache(ctx, img); err != nil {
		return nil, fmt.Errorf("sandbox: image %s: the Go build cache: %w", spec.Image, err)
	}
	sb, err := f.create(ctx, img)
	if err != nil {
		return nil, err
	}
	if err := f.loginEnv(ctx, sb); err != nil {
		_ = sb.Close()
		return nil, fmt.Errorf("sandbox: image %s: %w", spec.Image, err)
	}
	if img.goCache != nil {
		img.env = setEnv(img.env, "GOCACHE", img.goCache.path)
	}
	return sb, nil
}

// checkWorkDir refuses a working directory that is not absolute or that would hide
// what the sandbox mounts itself.
func checkWorkDir(wd string) error {
	if !path.IsAbs(wd) {
		return configError("the working directory must be absolute, got " + wd)
	}
	c := path.Clean(wd)
	for _, bad := range []string{"/", "/proc", "/dev", "/sys", "/tmp", "/etc"} {
		if c == bad || bad != "/" && strings.HasPrefix(c, bad+"/") {
			return configError("the working directory cannot be " + c)
		}
	}
	return nil
}

// resolveUser sets uid, gid and home from the image's User: "" and "root" are 0
// (docker's default), "N" or "N:M" numeric ids, a name is looked up in the image's
// /etc/passwd (and a group name in /etc/group). HOME is the user's passwd entry's
// home, else /root for uid 0 and / otherwise, as docker does.
func (img *imageState) resolveUser() error {
	user, group, _ := strings.Cut(img.root.User, ":")
	if user == "" {
		user = "0"
	}
	passwd := readImageFile(img.root.Dir, "etc/passwd")
	entry := func(name string) []string {
		for line := range strings.Lines(string(passwd)) {
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) >= 7 && (f[0] == name || f[2] == name) {
				return f
			}
		}
		return nil
	}
	e := entry(user)
	switch {
	case isNumber(user):
		img.uid = user
	case e != nil:
		img.uid = e[2]
	default:
		return fmt.Errorf("the image's User %q is not in its /etc/passwd", img.root.User)
	}
	switch {
	case group == "" && e != nil:
		img.gid = e[3]
	case group == "":
		img.gid = img.uid
	case isNumber(group):
		img.gid = group
	default:
		for line := range strings.Lines(string(readImageFile(img.root.Dir, "etc/group"))) {
			if f := strings.Split(strings.TrimSpace(line), ":"); len(f) >= 3 && f[0] == group {
				img.gid = f[2]
			}
		}
		if img.gid == "" {
			return fmt.Errorf("the image's User %q names a group not in its /etc/group", img.root.User)
		}
	}
	switch {
	case e != nil && e[5] != "":
		img.home = e[5]
	case img.uid == "0":
		img.home = "/root"
	default:
		img.home = "/"
	}
	return nil
}

func isNumber(s string) bool {
	n, err := strconv.ParseUint(s, 10, 32)
	return err == nil && n < 1<<31
}

// readImageFile reads a small file of the image's root through an [os.Root] (nil
// when it is missing or larger than 1 MiB).
func readImageFile(dir, name string) []byte {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer r.Close()
	fl, err := r.Open(name)
	if err != nil {
		return nil
	}
	defer fl.Close()
	b, err := io.ReadAll(io.LimitReader(fl, 1<<20+1))
	if err != nil || len(b) > 1<<20 {
		return nil
	}
	return b
}

// imageEnv is the environment of an image sandbox's commands: the image's Env (a
// later entry wins over an earlier one of the same name), then what docker adds
// when the image lacks it (PATH, HOME), HOSTNAME, and one thread for BLAS and
// OpenMP unless the image says otherwise.
func imageEnv(env []string, home string) []string {
	var out []string
	seen := map[string]int{}
	set := func(kv string, override bool) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return
		}
		if i, ok := seen[k]; ok {
			if override {
				out[i] = kv
			}
			return
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range env {
		set(kv, true)
	}
	set("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", false)
	set("HOME="+home, false)
	set("HOSTNAME=sandbox", true)
	set("OPENBLAS_NUM_THREADS=1", false)
	set("OMP_NUM_THREADS=1", false)
	return out
}

// condaProfiles are where a conda installation's shell hook lives in the images of
// the SWE datasets (/opt/miniconda3 in SWE-bench's, /opt/conda, miniforge).
var condaProfiles = []string{"opt/*/etc/profile.d/conda.sh", "root/*/etc/profile.d/conda.sh", "usr/local/*/etc/profile.d/conda.sh"}

// hasConda reports whether the image's root has a conda installation.
func hasConda(dir string) bool {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	for _, p := range condaProfiles {
		if m, _ := fs.Glob(r.FS(), p); len(m) > 0 {
			return true
		}
	}
	return false
}

// loginEnv gives an image with a conda installation the environment a login shell
// has there: SWE-bench's images activate their "testbed" environment in /root/.bashrc,
// which bash -l reads through /root/.profile, so "docker exec bash -lc CMD" runs
// tests in it. The environment of `bash -lc 'env -0'`, run once per image root and
// user in the sandbox itself, becomes every command's (less PWD, OLDPWD, SHLVL and
// _); HOSTNAME stays the sandbox's.
func (f *Factory) loginEnv(ctx context.Context, sb *Sandbox) error {
	img := sb.img
	if !hasConda(img.root.Dir) {
		return nil
	}
	key := img.root.Dir + "\x00" + img.uid + "\x00" + strings.Join(img.env, "\x00")
	if v, ok := f.loginEnvs.Load(key); ok {
		img.env = v.([]string)
		return nil
	}
	res, err := sb.RunDetailed(ctx, rollout.Command{Argv: []string{"/bin/bash", "-lc", "env -0"}})
	if err != nil {
		return fmt.Errorf("the login shell's environment: %w", err)
	}
	if res.ExitCode != 0 || res.OutputTruncated {
		return fmt.Errorf("the login shell's environment: bash -lc 'env -0' exited %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	var env []string
	for kv := range bytes.SplitSeq(res.Stdout, []byte{0}) {
		k, _, ok := bytes.Cut(kv, []byte("="))
		if !ok || slices.Contains([]string{"PWD", "OLDPWD", "SHLVL", "_"}, string(k)) {
			continue
		}
		env = append(env, string(kv))
	}
	env = imageEnv(env, img.home)
	f.loginEnvs.Store(key, env)
	img.env = env
	return nil
}

// imageBwrapArgs is the bubblewrap flag list of an image sandbox: today's
// namespaces, capabilities, /proc, /dev, /tmp and /dev/shm, over the image's root
// (an overlay, bound read-only) instead of the host's /usr, with the workspace at
// the working directory, the image's user and environment.
func imageBwrapArgs(f *Factory, s *Sandbox, cwd string) []string {
	l := f.cfg.Limits
	img := s.img
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--uid", img.uid, "--gid", img.gid, "--hostname", "sandbox",
		"--ro-bind", filepath.Join(s.dir, imageRootfs), "/",
		"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev",
	}
	if img.network {
		a = append(a, "--share-net")
	}
	if l.TmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(l.TmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	if l.ShmSize > 0 {
		a = append(a, "--size", strconv.FormatInt(l.ShmSize, 10))
	}
	a = append(a, "--tmpfs", "/dev/shm", "--bind", s.bind, img.workDir)
	if img.goCache != nil {
		a = append(a, "--bind", filepath.Join(s.dir, imageGoCache), img.goCache.path)
	}
	a = append(a, "--chdir", cwd, "--remount-ro", "/dev", "--clearenv")
	for _, kv := range img.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			a = append(a, "--setenv", k, v)
		}
	}
	return a
}
