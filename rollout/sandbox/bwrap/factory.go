package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/agentic-opd/agenticopd/rollout"
)

// Factory makes one [Sandbox] per rollout. It implements [rollout.SandboxFactory] and is
// safe for concurrent use. A Factory holds no resources of its own: each Sandbox is
// closed by whoever made it.
type Factory struct {
	cfg Config
	// asRoot is true when the library runs as root and sandboxes run as cfg.UID/GID.
	asRoot bool
	// rootLinks are the /bin, /lib… entries of the host root, reproduced inside.
	rootLinks []rootEntry
	// pythonBinds are host directories bound read-only for an interpreter outside /usr.
	pythonBinds []string
	// cg is where sandbox cgroups are made (nil: none, see enforcement.CgroupMissing).
	cg          *cgroupHost
	enforcement Enforcement
	// overlay is true when workspaces that are not a tmpfs are mounted as an
	// overlay of their own (root, bubblewrap), so that no host path shows inside;
	// overlayNS when, without root, each is an overlay in a user and mount
	// namespace of its own (see overlay.go).
	overlay, overlayNS bool
	// loginEnvs caches the login shell's environment of an image root (image.go).
	loginEnvs *sync.Map
	// copyImageWorkspaces is true when an image's working directory is copied into
	// each workspace rather than overlaid (Config.CopyImageWorkspace, or idmapped
	// mounts refused on this host).
	copyImageWorkspaces bool
	idmapWarned         *atomic.Bool
	// goWarmErrs holds, by warm cache directory, why a Go build cache could not be
	// warmed (imagegocache.go), so that it is tried once per factory.
	goWarmErrs *sync.Map
	// ownNS is true when the library, as root, starts each bwrap as the init of a pid
	// namespace of its own, held at its options until it is in its cgroup (gate.go);
	// unshare is, without root, the unshare(1) that starts each bwrap as the init of a
	// pid namespace of its own (see reaped in run.go). Where the probe found that
	// neither works, both are off and bwrap is started directly.
	ownNS   bool
	unshare string
}

var _ rollout.SandboxFactory = (*Factory)(nil)

// New checks cfg, then runs a probe: a trivial Python command in a fresh workspace,
// through bubblewrap with the full flag list, as the sandbox uid (or unconfined, when
// cfg.Unconfined is set). With cfg.Images set, and without root, it also tries what
// an image sandbox needs of the host (a tmpfs and an overlay mounted in a user
// namespace; see the package documentation, Image sandboxes). It returns a
// [*ProbeError] when the probe fails: wrapping [ErrBwrapNotFound] (the message says
// how to install bubblewrap and mentions the unconfined opt-in),
// [ErrNamespacesDenied] (the kernel refused the namespaces), [ErrImageUnsupported]
// (the host cannot run image sandboxes, and why), or [ErrProbeFailed]. A bad cfg
// gives an error wrapping [ErrInvalidConfig].
//
// Unlike most constructors New does I/O, on purpose: a Factory exists only when it
// can run commands, so a broken host fails at start-up with an error that says what
// to do, not in the middle of a training run.
func New(ctx context.Context, cfg Config) (*Factory, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Factory{cfg: cfg, asRoot: os.Geteuid() == 0, rootLinks: hostRootEntries(), loginEnvs: &sync.Map{}, idmapWarned: &atomic.Bool{}, goWarmErrs: &sync.Map{},
		copyImageWorkspaces: cfg.CopyImageWorkspace}
	f.ownNS = f.asRoot
	if !f.asRoot {
		f.unshare = unsharePath
	}
	f.detectEnforcement()
	if n := f.removeStale(); n > 0 {
		cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "sandbox: removed sandboxes left by a process that died",
			slog.Int("count", n), slog.String("base_dir", cfg.BaseDir))
	}
	err := f.checkBinaries()
	if err == nil && !cfg.Unconfined {
		f.pythonBinds, err = pythonPrefixes(ctx, cfg.Python)
		if err != nil {
			err = &ProbeError{Kind: ErrProbeFailed, Command: []string{cfg.Python}, ExitCode: -1, Err: err,
				Advice: "Config.Python must be a working interpreter"}
		} else if len(f.pythonBinds) > 0 {
			f.enforcement.HostPathVisible = strings.TrimPrefix(f.enforcement.HostPathVisible+"; ", "; ") +
				"Config.Python lies outside /usr: its installation prefix is bound at its host path (" +
				strings.Join(f.pythonBinds, ", ") + ")"
		}
	}
	if err == nil {
		err = f.probeReaping(ctx)
		if err != nil && f.cg != nil && !errors.Is(err, ErrNamespacesDenied) && !errors.Is(err, ErrBwrapNotFound) {
			// The cgroup may be what failed (a parent that takes no children, a
			// wrapper the sandbox uid cannot run): try once without it.
			if perr := f.withoutCgroup(err).runProbe(ctx); perr == nil {
				err = nil
			}
		}
	}
	if err == nil && cfg.Images != nil && !cfg.Unconfined && !f.asRoot {
		err = imageSupport(f.asRoot, kernelRelease(), checkImagesNS(ctx, cfg.BaseDir, cfg.BwrapPath))
	}
	if err != nil {
		cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox: probe failed", slog.Any("error", err))
		return nil, err
	}
	e := f.enforcement
	if e.Cgroup == CgroupNone {
		cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox: no cgroup, limits hold per process only",
			slog.Any("per_process_only", e.PerProcessOnly), slog.String("reason", e.CgroupMissing))
	}
	if e.HostPathVisible != "" && !cfg.Unconfined {
		cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox: the workspace's host path is visible inside",
			slog.String("reason", e.HostPathVisible))
	}
	cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "sandbox: ready", slog.String("backend", f.backend()),
		slog.Int("uid", f.uid()), slog.String("python", cfg.Python), slog.Any("python_binds", f.pythonBinds),
		slog.String("cgroup", string(e.Cgroup)), slog.String("storage", string(e.Storage)),
		slog.String("host_path_visible", e.HostPathVisible))
	return f, nil
}

// Probe runs the construction probe again: a trivial Python command in a fresh
// workspace. It returns nil or a [*ProbeError], as [New] does.
func (f *Factory) Probe(ctx context.Context) error {
	if err := f.checkBinaries(); err != nil {
		return err
	}
	return f.runProbe(ctx)
}

// checkBinaries reports a missing bwrap, prlimit, unshare (without root) or
// interpreter.
func (f *Factory) checkBinaries() error {
	cfg := f.cfg
	if !cfg.Unconfined {
		if _, err := os.Stat(cfg.BwrapPath); err != nil {
			return &ProbeError{
				Kind: ErrBwrapNotFound, Command: []string{cfg.BwrapPath}, ExitCode: -1, Err: err,
				Advice: "install it (apt-get install -y --no-install-recommends bubblewrap) " + unconfinedAdvice,
			}
		}
	}
	if _, err := os.Stat(prlimitPath); err != nil {
		return &ProbeError{Kind: ErrProbeFailed, Command: []string{prlimitPath}, ExitCode: -1, Err: err,
			Advice: "install util-linux, which provides prlimit"}
	}
	if _, err := os.Stat(f.unshare); f.unshare != "" && err != nil && !cfg.Unconfined {
		return &ProbeError{Kind: ErrProbeFailed, Command: []string{f.unshare}, ExitCode: -1, Err: err,
			Advice: "install util-linux, which provides unshare"}
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return &ProbeError{Kind: ErrProbeFailed, Command: []string{cfg.Python}, ExitCode: -1, Err: err,
			Advice: "install python3 (apt-get install -y --no-install-recommends python3) or set Config.Python"}
	}
	return nil
}

// runProbe runs a trivial Python command in a fresh workspace.
func (f *Factory) runProbe(ctx context.Context) error {
	cfg := f.cfg
	sb, err := f.create(ctx, nil)
	if err != nil {
		return &ProbeError{Kind: ErrProbeFailed, ExitCode: -1, Err: err,
			Advice: "Config.BaseDir must be a writable directory"}
	}
	defer sb.Close()
	argv := []string{cfg.Python, "-c", "import sys; print('sandbox ok')"}
	res, err := sb.RunDetailed(ctx, rollout.Command{Argv: argv, Timeout: cfg.Timeout})
	cmdline := append([]string{f.backend()}, argv...)
	switch {
	case errors.Is(err, ErrStart):
		return classifyProbe(cmdline, string(res.Stderr), res.ExitCode, nil, f.uid())
	case err != nil:
		return &ProbeError{Kind: ErrProbeFailed, Command: cmdline, ExitCode: -1, Err: err}
	case res.ExitCode != 0 || string(res.Stdout) != "sandbox ok\n":
		return classifyProbe(cmdline, string(res.Stderr), res.ExitCode, nil, f.uid())
	}
	return nil
}

// probeReaping runs the probe. When it fails with bwrap started in a pid namespace of
// its own (by the library as root, by unshare(1) without), it runs it once more with
// bwrap started directly and keeps that if it works: a host may refuse those
// namespaces (bwrap installed setuid, a policy on unprivileged user namespaces) while
// bwrap itself works. Each command's sandbox init is then left to pid 1 to reap, with a
// warning. When both fail, the error is the second's, which carries bubblewrap's own
// message (the first may be no more than the kernel's refusal to make the namespaces,
// with no output).
func (f *Factory) probeReaping(ctx context.Context) error {
	err := f.runProbe(ctx)
	if err == nil || (!f.ownNS && f.unshare == "") || errors.Is(err, ErrBwrapNotFound) {
		return err
	}
	ownNS, unshare := f.ownNS, f.unshare
	f.ownNS, f.unshare = false, ""
	if perr := f.runProbe(ctx); perr != nil {
		f.ownNS, f.unshare = ownNS, unshare
		return perr
	}
	f.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sandbox: bwrap cannot start in a pid namespace of its own: "+
		"each command's sandbox init is left to pid 1 to reap, and counts against Limits.Processes until then",
		slog.Any("error", err))
	return nil
}

// NewSandbox creates a fresh workspace directory under Config.BaseDir, owned by the
// sandbox uid, and returns a sandbox on it. The dynamic type of the result is
// [*Sandbox]. The caller closes it.
func (f *Factory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := f.create(ctx, nil)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return sb, nil
}

// Unconfined reports whether this factory's sandboxes run commands without isolation.
func (f *Factory) Unconfined() bool { return f.cfg.Unconfined }

// Python is the interpreter commands run with (also "python" and "python3" on the
// sandbox's PATH).
func (f *Factory) Python() string { return f.cfg.Python }

func (f *Factory) backend() string {
	if f.cfg.Unconfined {
		return "unconfined"
	}
	return f.cfg.BwrapPath
}

// uid is the host uid sandboxed code runs as.
func (f *Factory) uid() int {
	if f.asRoot {
		return f.cfg.UID
	}
	return os.Geteuid()
}

// gid is the host gid sandboxed code runs as.
func (f *Factory) gid() int {
	if f.asRoot {
		return f.cfg.GID
	}
	return os.Getegid()
}

// credential is the SysProcAttr credential that drops root, or nil.
func (f *Factory) credential() *syscall.Credential {
	if !f.asRoot {
		return nil
	}
	return &syscall.Credential{Uid: uint32(f.cfg.UID), Gid: uint32(f.cfg.GID), Groups: []uint32{}}
}

// create makes a sandbox: with img, an image sandbox (image.go, imagemount.go).
func (f *Factory) create(ctx context.Context, img *imageState) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: new: %w", err)
	}
	dir, err := os.MkdirTemp(f.cfg.BaseDir, "agenticopd-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: new: %w", err)
	}
	ws := filepath.Join(dir, "workspace")
	fail := func(err error) (*Sandbox, error) {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: new: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if lock != nil { // create failed
			lock.Close()
		}
	}()
	if err := os.Mkdir(ws, 0o755); err != nil {
		return fail(err)
	}
	if f.cfg.Unconfined {
		bin := filepath.Join(dir, "bin")
		if err := os.Mkdir(bin, 0o755); err != nil {
			return fail(err)
		}
		for _, name := range []string{"python", "python3"} {
			if err := os.Symlink(f.cfg.Python, filepath.Join(bin, name)); err != nil {
				return fail(err)
			}
		}
	}
	if f.asRoot {
		for _, p := range []string{dir, ws} {
			if err := os.Chown(p, f.cfg.UID, f.cfg.GID); err != nil {
				return fail(err)
			}
		}
	}
	sb := &Sandbox{f: f, dir: dir, ws: ws, bind: ws, procs: map[*proc]struct{}{}, lock: lock, img: img}
	if img != nil && !f.asRoot {
		sb.holder, sb.mounted, err = f.mountImageNS(ctx, dir, img, f.copyImageWorkspaces)
		if err != nil {
			_ = sb.release()
			return nil, fmt.Errorf("sandbox: new: %w", err)
		}
		sb.ws = sb.holder.ws
	} else if img != nil {
		sb.mounted, err = f.mountImage(dir, img, f.copyImageWorkspaces)
		if err != nil {
			_ = sb.release()
			return nil, fmt.Errorf("sandbox: new: %w", err)
		}
	} else if f.enforcement.Storage == StorageTmpfs {
		if err := mountWorkspace(ws, f.cfg.DiskQuota, f.uid(), f.gid()); err != nil {
			return fail(err)
		}
		sb.mounted = true
	} else if f.overlay {
		if err := makeOverlay(dir, ws, f.uid(), f.gid(), f.asRoot); err != nil {
			return fail(err)
		}
		sb.overlaid = true
	} else if f.overlayNS {
		if sb.holder, err = startHolder(ctx, dir); err != nil {
			return fail(err)
		}
		sb.ws = sb.holder.ws
	}
	fail = func(err error) (*Sandbox, error) {
		_ = sb.release()
		return nil, fmt.Errorf("sandbox: new: %w", err)
	}
	if f.cg != nil {
		l := f.cfg.Limits
		if sb.cg, err = f.cg.newSandboxCgroup(filepath.Base(dir), l.Memory, l.Processes, f.uid(), f.gid()); err != nil {
			return fail(err)
		}
	}
	sb.wsDev = deviceOf(sb.ws)
	if sb.root, err = os.OpenRoot(sb.ws); err != nil {
		return fail(err)
	}
	lock = nil // the sandbox holds it until Close
	return sb, nil
}

// lockName is the file in a sandbox's directory that its process holds locked
// (flock) while the sandbox is open, so that [New] can tell a sandbox left by a
// library process that died (its tmpfs still mounted, its cgroups still there)
// from one in use.
const lockName = "lock"

// lockDir creates the lock file locked: under another name first, so that no other
// process ever finds it unlocked.
func lockDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, lockName+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, lockName))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeStale removes the sandboxes under Config.BaseDir that no live process holds:
// left by a library process that was killed, they would keep a tmpfs mounted and
// cgroups made. It returns how many it removed.
func (f *Factory) removeStale() int {
	entries, err := os.ReadDir(f.cfg.BaseDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "agenticopd-sandbox-") {
			continue
		}
		dir := filepath.Join(f.cfg.BaseDir, e.Name())
		lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
		if err != nil {
			continue // being created, or not ours
		}
		if syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			lf.Close()
			continue // in use
		}
		_ = unmountWorkspace(filepath.Join(dir, "workspace"))
		_ = unmountImage(dir)
		if f.cg != nil {
			f.cg.removeStale(e.Name())
		}
		if noMountBelow(dir) == nil && removeAll(dir) == nil {
			n++
		}
		lf.Close()
	}
	return n
}

// release frees what create made: the root, the workspace's mount, the cgroups and
// the directory.
func (s *Sandbox) release() error {
	var errs []error
	if s.root != nil {
		errs = append(errs, s.root.Close())
	}
	defer s.lock.Close() // after the directory is gone
	if s.cg != nil {
		errs = append(errs, s.cg.remove())
	}
	if s.img != nil {
		if s.holder == nil { // without root its mounts end with the holder's namespace
			errs = append(errs, unmountImage(s.dir))
		}
		defer s.img.release() // after its files are no longer mounted
	} else if s.mounted || s.overlaid {
		errs = append(errs, unmountWorkspace(s.bind))
	}
	if s.holder != nil {
		errs = append(errs, s.holder.stop())
	}
	if err := noMountBelow(s.dir); err != nil {
		// Never remove through a mount: the image's files could be below.
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, removeAll(s.dir))
	return errors.Join(errs...)
}

// rootEntry is one top-level host entry reproduced in the sandbox root: a symlink
// (merged /usr) or a directory bound read-only.
type rootEntry struct {
	name, link string
}

// hostRootEntries looks at /bin, /sbin and the /lib directories of the host.
func hostRootEntries() []rootEntry {
	entries := []rootEntry{}
	for _, name := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(name)
		if err != nil {
			continue
		}
		e := rootEntry{name: name}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if e.link, err = os.Readlink(name); err != nil {
				continue
			}
		} else if !fi.IsDir() {
			continue
		}
		entries = append(entries, e)
	}
	return entries
}

// pythonPrefixes returns the host directories to bind read-only so that an
// interpreter outside /usr works inside the sandbox: its directory and its
// installation prefixes.
func pythonPrefixes(ctx context.Context, python string) ([]string, error) {
	resolved, err := filepath.EvalSymlinks(python)
	if err != nil {
		return nil, err
	}
	if underUsr(python) && underUsr(resolved) {
		return []string{}, nil
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", "import sys;print(sys.base_prefix);print(sys.prefix)")
	cmd.Env = []string{}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", python, err, strings.TrimSpace(errb.String()))
	}
	cands := append(strings.Fields(out.String()), filepath.Dir(python), filepath.Dir(resolved))
	var binds []string
	for _, c := range cands {
		c = filepath.Clean(c)
		if real, err := filepath.EvalSymlinks(c); err == nil && underUsr(real) || underUsr(c) {
			continue // already inside through /usr
		}
		if !filepath.IsAbs(c) || filepath.Dir(c) == "/" {
			// Binding "/", "/tmp", "/home"… would open the host to the sandbox.
			return nil, fmt.Errorf("%s: refusing to bind %q into the sandbox: install the interpreter in a directory of its own", python, c)
		}
		binds = append(binds, c)
	}
	slices.Sort(binds)
	binds = slices.Compact(binds)
	// Drop directories already covered by a parent in the list.
	out2 := binds[:0]
	for _, b := range binds {
		if len(out2) > 0 && strings.HasPrefix(b, out2[len(out2)-1]+"/") {
			continue
		}
		out2 = append(out2, b)
	}
	return out2, nil
}

func underUsr(p string) bool { return p == "/usr" || strings.HasPrefix(p, "/usr/") }

// Sandbox is one workspace and the commands run in it. It implements
// [rollout.Sandbox] and is safe for concurrent use.
type Sandbox struct {
	f   *Factory
	dir string // host directory holding the workspace (and, unconfined, bin/)
	ws  string // host path of the workspace, where the host-side methods reach it
	// bind is the workspace's directory in the sandbox's directory: what bwrap binds
	// at WorkspaceDir, and what a mount is mounted on. It is ws but without root,
	// when ws reaches the overlay through its holder's /proc/<pid>/root.
	bind string
	root *os.Root
	// mounted is true when the workspace is a tmpfs the sandbox mounted; wsDev is
	// the workspace's device.
	mounted bool
	wsDev   uint64
	// overlaid is true when the workspace is an overlay the sandbox mounted, its
	// files in the upper layer on disk (a walked workspace under bubblewrap, as root).
	overlaid bool
	// holder, without root, holds the namespaces in which the workspace is an
	// overlay (ws is then where the host reaches it: /proc/<holder>/root/<bind>).
	holder *overlayHolder
	// img is set for a sandbox over an image's root (NewSandboxFor); network when
	// its commands keep the host's network.
	img     *imageState
	network bool
	lock    *os.File // held locked while the sandbox is open
	quota   quotaState
	// cg is the sandbox's cgroup (nil without one); runs numbers its commands.
	cg   *sandboxCgroup
	runs atomic.Int64

	mu     sync.Mutex
	closed bool
	procs  map[*proc]struct{}
	active sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ rollout.Sandbox = (*Sandbox)(nil)

// Dir is the workspace path as commands see it: [WorkspaceDir] under bubblewrap (an
// image sandbox's working directory for one made by [Factory.NewSandboxFor]), the
// host path in unconfined mode.
func (s *Sandbox) Dir() string {
	if s.f.cfg.Unconfined {
		return s.ws
	}
	if s.img != nil {
		return s.img.workDir
	}
	return WorkspaceDir
}

// HostDir is the workspace's path on the host: without root, when the workspace is
// an overlay in a namespace of its own, a path under /proc/<pid>/root that reaches
// it there. Code on the host must not follow
// paths under it by name: the sandboxed code can plant symlinks there. Use the file
// methods, which go through [os.Root].
func (s *Sandbox) HostDir() string { return s.ws }

// Close kills every command still running, waits for them, and removes the
// workspace. It is idempotent and safe to call concurrently with Run.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for p := range s.procs {
			p.kill(reasonClosed)
		}
		s.mu.Unlock()
		s.active.Wait()
		if err := s.release(); err != nil {
			s.closeErr = fmt.Errorf("sandbox: close: %w", err)
		}
	})
	return s.closeErr
}

// removeAll removes dir and what it holds ([removeTree]: by descriptors, directories
// the sandboxed code closed given back their bits, linear at any depth).
func removeAll(dir string) error {
	return removeTree(dir)
}

// enter registers a Run; it reports false after Close.
func (s *Sandbox) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

// track registers a started process so Close can kill it.
func (s *Sandbox) track(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		p.kill(reasonClosed)
		return
	}
	s.procs[p] = struct{}{}
}

func (s *Sandbox) untrack(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, p)
}
