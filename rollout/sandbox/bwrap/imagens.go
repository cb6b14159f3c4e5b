package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Without root, an image sandbox's file systems are those of mountImage, mounted in
// a user and mount namespace of the sandbox's own, held by a holder process
// (overlay.go) that runs a script of mount(8) commands in two steps: first the
// tmpfs the layers live on, then, once the library has written the upper layers
// through /proc/<holder>/root (the mount points and /etc/hosts of the root, a copied
// working directory, the Go build cache's directories), the overlays and binds.
// The script opens the image's directories as descriptors (an overlay takes its
// lower layers from its own mount namespace only, so they cannot be the library's),
// by paths the library resolved inside the image through an [os.Root] (no symlink of
// the image leads outside it; the image's root is not written while it is in use),
// and names them /proc/self/fd/N in the mount options, as the library names them
// when it mounts as root: mountinfo inside shows no host path. The layers' own
// directories are named relative to the sandbox's directory.

// mountImageNS makes an image sandbox's file systems in a namespace of its own and
// returns their holder; tmpfs says whether the workspace's layer is a tmpfs (statfs
// bounds it).
func (f *Factory) mountImageNS(ctx context.Context, dir string, img *imageState, copyWS bool) (h *overlayHolder, tmpfs bool, err error) {
	uid, gid := f.uid(), f.gid()
	for _, d := range []string{imageLayers, imageRootfs} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return nil, false, err
		}
	}
	imgRoot, err := os.OpenRoot(img.root.Dir)
	if err != nil {
		return nil, false, fmt.Errorf("the image's root: %w", err)
	}
	defer imgRoot.Close()
	rel := img.workDir[1:]
	fi, statErr := imgRoot.Stat(rel)
	if statErr == nil && !fi.IsDir() {
		return nil, false, fmt.Errorf("the working directory %s is not a directory in the image", img.workDir)
	}
	if statErr != nil {
		fi = nil // the image lacks it: the workspace starts empty
	}
	// An idmapped mount of a host file system needs root: without it, files the
	// library's uid does not own show as the overflow id, and a working directory
	// it does not own is copied, so that the code owns its workspace.
	if fi != nil && !copyWS {
		if wu, wg := owner(fi); wu != uid || wg != gid {
			f.warnIdmap(img, fmt.Errorf("without root, an image directory owned by uid %d is not idmapped to uid %d", wu, uid))
			copyWS = true
		}
	}
	img.copied = copyWS && fi != nil

	var wsLower string // "": the workspace's lower layer is empty
	if fi != nil && !copyWS {
		if wsLower, err = resolveIn(imgRoot, img.root.Dir, rel); err != nil {
			return nil, false, err
		}
	}
	if img.goCache != nil {
		if err := os.Mkdir(filepath.Join(dir, imageGoCache), 0o755); err != nil {
			return nil, false, err
		}
	}
	tmpfs = !f.cfg.DisableWorkspaceMount && f.cfg.DiskQuota > 0
	script, env, gcBase := f.imageNSScript(img, wsLower, tmpfs)
	if gcBase == imageGoCacheLayer {
		if err := os.Mkdir(filepath.Join(dir, gcBase), 0o755); err != nil {
			return nil, false, err
		}
	}
	h, err = startHolderScript(ctx, dir, script, env)
	if err != nil {
		return nil, false, fmt.Errorf("mounting the image sandbox's layers in a user namespace: %w", err)
	}
	defer func() {
		if err != nil {
			_ = h.stop()
			h = nil
		}
	}()
	// The sandbox's directory as the holder sees it, its tmpfs mounted.
	nsDir := h.root + dir
	layers := filepath.Join(nsDir, imageLayers)
	for _, d := range []string{"root", "root-work", "ws", "ws-work", "empty"} {
		if err := os.Mkdir(filepath.Join(layers, d), 0o755); err != nil {
			return nil, false, err
		}
	}
	if err := prepareRootfs(filepath.Join(layers, "root"), imgRoot, img); err != nil {
		return nil, false, err
	}
	if img.copied {
		if err := copyTree(imgRoot, rel, filepath.Join(layers, "ws"), uid, gid); err != nil {
			return nil, false, fmt.Errorf("copying %s from the image: %w", img.workDir, err)
		}
	}
	if gc := img.goCache; gc != nil && gc.stage == "" {
		if err := goCacheDirs(filepath.Join(nsDir, gcBase), gc.lower, uid, gid); err != nil {
			return nil, false, err
		}
	}
	if err := h.step(); err != nil {
		return nil, false, fmt.Errorf("mounting the image sandbox's overlays in a user namespace: %w", err)
	}
	return h, tmpfs, nil
}

// imageNSScript is the holder's script for an image sandbox without root (see
// above), the environment it needs, and the directory that holds the Go build
// cache's upper layer: wsLower is the host path of the image's working directory
// ("" for an empty lower layer), tmpfs whether the layers live on a tmpfs.
func (f *Factory) imageNSScript(img *imageState, wsLower string, tmpfs bool) (script string, env []string, gcBase string) {
	// The shell opens the image's directories itself (an overlay takes a lower layer
	// only from its own mount namespace), by paths in its environment (not its
	// command line), as descriptors 3, 4…
	var opens []string
	fd := func(path string) string {
		n := strconv.Itoa(3 + len(opens))
		env = append(env, "DIR"+n+"="+path)
		opens = append(opens, n+`<"$DIR`+n+`"`)
		return "/proc/self/fd/" + n
	}
	empty := imageLayers + "/empty"
	overlay := func(lower, upper, work, target string) string {
		return "mount -t overlay overlay -o lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work +
			",userxattr,nosuid,nodev " + target
	}
	tmpfsMount := func(inodes int, target string) string {
		return "mount -t tmpfs -o mode=0755,nr_inodes=" + strconv.Itoa(inodes) + ",size=" +
			strconv.FormatInt(f.cfg.DiskQuota, 10) + ",nosuid,nodev tmpfs " + target
	}
	var first []string
	if tmpfs {
		first = append(first, tmpfsMount(MaxWorkspaceEntries+1024, imageLayers)) // +1024: the root layer's, as mountImage
	}
	second := []string{overlay(fd(img.root.Dir), imageLayers+"/root", imageLayers+"/root-work", imageRootfs)}
	if wsLower != "" {
		second = append(second, overlay(fd(wsLower), imageLayers+"/ws", imageLayers+"/ws-work", "workspace"))
	} else {
		second = append(second, overlay(empty, imageLayers+"/ws", imageLayers+"/ws-work", "workspace"))
	}
	gcBase = imageLayers
	switch gc := img.goCache; {
	case gc == nil:
	case gc.stage != "":
		env = append(env, "GOSTAGE="+gc.stage)
		second = append(second, `mount --bind "$GOSTAGE" `+imageGoCache)
	default:
		if !tmpfs && f.cfg.DiskQuota > 0 {
			gcBase = imageGoCacheLayer
			first = append(first, tmpfsMount(MaxWorkspaceEntries, gcBase))
		}
		lower := empty
		if gc.lower != "" {
			lower = fd(gc.lower)
		}
		second = append(second, overlay(lower, gcBase+"/"+goCacheUpper, gcBase+"/"+goCacheWork, imageGoCache))
	}
	closeFds := ""
	for i := range opens {
		closeFds += " " + strconv.Itoa(3+i) + "<&-"
	}
	first = append(append([]string{"exec " + strings.Join(opens, " ")}, first...), "echo ready", "read -r line")
	// The shell, the holder's pid-namespace init, stays to reap (see holderScript).
	second = append(second, "echo ready", "exec"+closeFds, "cat >/dev/null")
	return strings.Join(append(first, second...), " && "), env, gcBase
}

// checkImagesNS tries in base what an image sandbox needs of the host without
// root: a user and mount namespace in which a tmpfs, and an overlay whose lower
// layer is on base's file system, can be mounted, and in which bubblewrap can make
// the sandbox's own namespaces (a user namespace inside another).
func checkImagesNS(ctx context.Context, base, bwrapPath string) error {
	for _, p := range []string{unsharePath, nsenterPath, mountPath} {
		if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(base, "agenticopd-mountcheck-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	for _, d := range []string{imageLayers, imageRootfs, "lower"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	script := "exec 3<lower && mount -t tmpfs -o mode=0755,size=1048576,nosuid,nodev tmpfs " + imageLayers +
		" && mkdir " + imageLayers + "/up " + imageLayers + "/work" +
		" && mount -t overlay overlay -o lowerdir=/proc/self/fd/3,upperdir=" + imageLayers + "/up,workdir=" + imageLayers +
		"/work,userxattr,nosuid,nodev " + imageRootfs +
		` && "$BWRAP" --unshare-all --unshare-user --disable-userns --die-with-parent --cap-drop ALL --uid 0 --gid 0` +
		` --ro-bind / / --proc /proc --dev /dev -- /bin/true 3<&-` +
		" && echo ready && exec cat >/dev/null 3<&-"
	h, err := startHolderScript(ctx, dir, script, []string{"BWRAP=" + bwrapPath})
	if err != nil {
		return err
	}
	return h.stop()
}

// imageSupport turns what [New] found into why image sandboxes cannot run on this
// host, or nil: as root the library mounts on the host; without root, trial is
// checkImagesNS's error and release the kernel's release.
func imageSupport(root bool, release string, trial error) error {
	if root || trial == nil {
		return nil
	}
	pe := &ProbeError{Kind: ErrImageUnsupported, Command: []string{unsharePath, "--user", "--map-root-user", "--mount", "--", mountPath, "-t", "overlay"},
		ExitCode: -1, Err: trial}
	msg := trial.Error()
	switch {
	case errors.Is(trial, os.ErrNotExist):
		pe.Advice = "install util-linux (unshare, nsenter and mount), or run as root"
	case strings.Contains(msg, "unshare") || strings.Contains(msg, "namespace"):
		pe.Advice = "without root an image sandbox mounts its file systems in a user namespace and runs bubblewrap in it, which this host refused: " +
			"allow unprivileged user namespaces, nested ones included (user.max_user_namespaces > 1, kernel.unprivileged_userns_clone=1 where it exists, " +
			"no seccomp or AppArmor rule denying them), or run as root"
	case !kernelAtLeast(release, 5, 11):
		pe.Advice = "without root an image sandbox mounts its overlays in a user namespace, which needs Linux 5.11 or later (this kernel is " +
			release + "): upgrade the kernel, or run as root"
	default:
		pe.Advice = "without root an image sandbox mounts its overlays in a user namespace, and the kernel refused one whose lower layer is on " +
			"the file system of Config.BaseDir: keep Config.BaseDir and the image cache on a local file system (ext4, xfs, btrfs, tmpfs; " +
			"not an overlay or a network file system), or run as root"
	}
	return pe
}

// kernelAtLeast reports whether release ("6.18.44-…") is major.minor or later; a
// release it cannot read counts as recent enough (the trial decides).
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return true
	}
	mnr := parts[1]
	if i := strings.IndexFunc(mnr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		mnr = mnr[:i]
	}
	maj, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(mnr)
	if err1 != nil || err2 != nil {
		return true
	}
	return maj > major || maj == major && mi >= minor
}

// resolveIn is the host path of the directory rel of the image whose root dir r
// opened, resolved inside it: symlinks followed as the image has them, never out.
func resolveIn(r *os.Root, dir, rel string) (string, error) {
	fl, err := r.Open(rel)
	if err != nil {
		return "", err
	}
	defer fl.Close()
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fl.Fd())))
	if err != nil {
		return "", err
	}
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if p != base && !strings.HasPrefix(p, base+"/") {
		return "", fmt.Errorf("%s resolves to %s, outside the image's root", rel, p)
	}
	return p, nil
}

// kernelRelease is the running kernel's release ("" when unknown).
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
