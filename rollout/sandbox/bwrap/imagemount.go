package bwrap

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The directories of an image sandbox, in the sandbox's directory (see the package
// documentation, Image sandboxes): the tmpfs holding the upper layers, the image's
// root as an overlay, and the workspace.
const (
	imageLayers    = "layers"    // a tmpfs of DiskQuota bytes (a directory with DisableWorkspaceMount)
	imageRootfs    = "rootfs"    // overlay: the image's root below, layers/root above
	imageLower     = "lower"     // the idmapped working directory, attached while the overlay is made
	imageRootLower = "rootlower" // the idmapped root, likewise
	imageHosts     = "etc/hosts"
)

// imageMounts lists the mount points of an image sandbox in the order they are
// unmounted: the workspace first, the tmpfs its layers live on last.
var imageMounts = []string{"workspace", imageGoCache, imageGoCacheLayer, imageRootfs, imageLower, imageRootLower, imageLayers}

// hostsFile is the /etc/hosts of every image sandbox: what docker gives a container.
const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"

// mountImage makes the image sandbox's file systems in dir: the layers' tmpfs (or
// directory), the root overlay (mountImageRoot), the workspace at dir/workspace
// (mountImageWorkspace) and a Go repository's build cache (mountGoCache). It returns whether the workspace is a tmpfs (statfs bounds
// it); img.copied says whether the working directory was copied.
func (f *Factory) mountImage(dir string, img *imageState, copyWS bool) (tmpfs bool, err error) {
	layers := filepath.Join(dir, imageLayers)
	if err := os.Mkdir(layers, 0o755); err != nil {
		return false, err
	}
	if f.enforcement.Storage == StorageTmpfs {
		opts := fmt.Sprintf("mode=0755,nr_inodes=%d", MaxWorkspaceEntries+1024) // +1024: the root layer's few entries
		if f.cfg.DiskQuota > 0 {
			opts += ",size=" + strconv.FormatInt(f.cfg.DiskQuota, 10)
		}
		if err := unix.Mount("tmpfs", layers, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return false, fmt.Errorf("mounting the image sandbox's tmpfs: %w", err)
		}
		tmpfs = true
	}
	for _, d := range []string{"root", "root-work", "ws", "ws-work", "empty"} {
		if err := os.Mkdir(filepath.Join(layers, d), 0o755); err != nil {
			return tmpfs, err
		}
	}
	if err := os.Chown(filepath.Join(layers, "ws"), f.uid(), f.gid()); err != nil {
		return tmpfs, err
	}
	imgRoot, err := os.OpenRoot(img.root.Dir)
	if err != nil {
		return tmpfs, fmt.Errorf("the image's root: %w", err)
	}
	defer imgRoot.Close()
	fi, statErr := imgRoot.Stat(img.workDir[1:])
	if statErr == nil && !fi.IsDir() {
		return tmpfs, fmt.Errorf("the working directory %s is not a directory in the image", img.workDir)
	}
	if statErr != nil {
		fi = nil // the image lacks it: the workspace starts empty
	}
	idmapped, err := f.mountImageRoot(dir, imgRoot, img)
	if err != nil {
		return tmpfs, err
	}
	if err := f.mountImageWorkspace(dir, imgRoot, img, fi, copyWS || !idmapped); err != nil {
		return tmpfs, err
	}
	if img.goCache != nil {
		return tmpfs, f.mountGoCache(dir, img, layers, tmpfs)
	}
	return tmpfs, nil
}

// mountImageRoot mounts the root overlay at dir/rootfs: read-only inside (bubblewrap
// binds it so), an overlay so that the mount points and /etc/hosts can be added
// without writing in the image. The host process that unpacked the image owns its
// files (an unpacked root keeps no owners of the image's own); where that is not the
// sandbox uid, the lower layer is an idmapped mount that makes them the sandbox
// uid's, so that the code, as the image's user, reads them as in the image (root's
// 0700 /root, where SWE images keep a .bashrc or a .venv). It reports false when
// the host refused the idmapped mount: the root is then as the host has it.
func (f *Factory) mountImageRoot(dir string, imgRoot *os.Root, img *imageState) (idmapped bool, err error) {
	uid, gid := f.uid(), f.gid()
	layers := filepath.Join(dir, imageLayers)
	lower := img.root.Dir
	idmapped = true
	rootFi, err := os.Stat(img.root.Dir)
	if err != nil {
		return false, err
	}
	if ru, rg := owner(rootFi); ru != uid || rg != gid {
		if err := os.Mkdir(filepath.Join(dir, imageRootLower), 0o755); err != nil {
			return false, err
		}
		if err := idmappedBind(imgRoot, ".", filepath.Join(dir, imageRootLower), ru, rg, uid, gid); err != nil {
			idmapped = false
			f.warnIdmap(img, err)
		} else {
			lower = filepath.Join(dir, imageRootLower)
			defer unix.Unmount(lower, unix.MNT_DETACH) // the overlay keeps its own reference
		}
	}
	if err := os.Mkdir(filepath.Join(dir, imageRootfs), 0o755); err != nil {
		return false, err
	}
	if err := prepareRootfs(filepath.Join(layers, "root"), imgRoot, img); err != nil {
		return false, err
	}
	return idmapped, mountOverlay(filepath.Join(dir, imageRootfs), lower, filepath.Join(layers, "root"), filepath.Join(layers, "root-work"))
}

// mountImageWorkspace mounts the workspace at dir/workspace: an overlay whose lower
// layer is the image's working directory (fi; nil when the image lacks it), with its
// owner's files the sandbox uid's (idmapped where they are not already), so the code
// owns its workspace. With copy, or where the idmapped mount is refused, the
// directory's files are copied, owned by the sandbox uid, into the upper layer of an
// overlay over an empty one: the workspace is still the root of a file system of its
// own (no host path in mountinfo), on the layers' tmpfs when there is one.
func (f *Factory) mountImageWorkspace(dir string, imgRoot *os.Root, img *imageState, fi fs.FileInfo, copyWS bool) error {
	uid, gid := f.uid(), f.gid()
	layers := filepath.Join(dir, imageLayers)
	ws, upper, work := filepath.Join(dir, "workspace"), filepath.Join(layers, "ws"), filepath.Join(layers, "ws-work")
	rel := img.workDir[1:]
	lower := filepath.Join(layers, "empty")
	if fi != nil && !copyWS {
		idl := filepath.Join(dir, imageLower)
		if err := os.Mkdir(idl, 0o755); err != nil {
			return err
		}
		wu, wg := owner(fi)
		if err := idmappedBind(imgRoot, rel, idl, wu, wg, uid, gid); err != nil {
			f.warnIdmap(img, err)
			copyWS = true
		} else {
			lower = idl
			defer unix.Unmount(idl, unix.MNT_DETACH) // the overlay keeps its own reference
		}
	}
	img.copied = copyWS && fi != nil
	if img.copied {
		if err := copyTree(imgRoot, rel, upper, uid, gid); err != nil {
			return fmt.Errorf("copying %s from the image: %w", img.workDir, err)
		}
	}
	return mountOverlay(ws, lower, upper, work)
}

// warnIdmap says once per factory that the host refused an idmapped mount.
func (f *Factory) warnIdmap(img *imageState, err error) {
	if f.idmapWarned.CompareAndSwap(false, true) {
		f.cfg.Logger.Warn("sandbox: idmapped mounts refused: image working directories are copied into each workspace, and image files are owned as on the host",
			slog.String("image_root", img.root.Dir), slog.Any("error", err))
	}
}

// prepareRootfs writes into the root overlay's upper layer, before the overlay is
// mounted, what bubblewrap and the code expect to find: the mount points (/proc,
// /dev, /tmp, the working directory, GOCACHE) the image lacks, /etc/hosts and /etc/hostname
// (and, with the network, the host's /etc/resolv.conf). Writing through the overlay
// would copy up directories whose owner an idmapped layer may not map. The image is
// looked at through an [os.Root], so its symlinks cannot lead outside.
func prepareRootfs(upper string, imgRoot *os.Root, img *imageState) error {
	r, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer r.Close()
	points := []string{"proc", "dev", "tmp", "etc", img.workDir[1:]}
	if img.goCache != nil {
		points = append(points, img.goCache.path[1:])
	}
	for _, d := range points {
		if fi, err := imgRoot.Stat(d); err == nil && fi.IsDir() {
			continue
		}
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("making %s in the image's root: %w", "/"+d, err)
		}
	}
	files := map[string]string{imageHosts: hostsFile, "etc/hostname": "sandbox\n"}
	if img.network {
		if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			files["etc/resolv.conf"] = string(b)
		}
	}
	for name, content := range files {
		if err := r.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := r.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing /%s in the image's root: %w", name, err)
		}
	}
	return nil
}

// owner is the uid and gid owning fi's file (-1 when unknown).
func owner(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// idmappedBind attaches at target a read-only view of the image's directory rel
// (resolved inside the image, whatever its symlinks) in which files owned by
// fromUID and fromGID are owned by the sandbox's host uid and gid: an idmapped mount
// (ext4, xfs, btrfs and tmpfs allow them, overlayfs does not), or a plain read-only
// bind when they are already. Other owners show as the overflow id, with their modes.
func idmappedBind(imgRoot *os.Root, rel, target string, fromUID, fromGID, uid, gid int) error {
	if fromUID < 0 || fromGID < 0 {
		return errors.New("idmapped mount: the owner is unknown")
	}
	d, err := imgRoot.Open(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if fromUID != uid || fromGID != gid {
		usernsFd, err := mappingNamespace(fromUID, uid, fromGID, gid)
		if err != nil {
			return fmt.Errorf("idmapped mount: %w", err)
		}
		defer unix.Close(usernsFd)
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(usernsFd)
	}
	tree, err := unix.OpenTree(int(d.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("idmapped mount: open_tree: %w", err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("idmapped mount: mount_setattr: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("idmapped mount: move_mount: %w", err)
	}
	return nil
}

// mappingNamespace returns a descriptor of a user namespace that maps uid from to
// host uid to (and gid likewise): a child process is made in it, its namespace
// opened, and the child ends.
func mappingNamespace(from, to, fromG, toG int) (int, error) {
	cmd := exec.Command("/bin/cat")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: from, HostID: to, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: fromG, HostID: toG, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	w.Close()
	_ = cmd.Wait()
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// copyTree copies the image's directory rel into the directory dst, owned by
// uid/gid: regular files, directories and symlinks (as they are), their permission,
// setuid, setgid and sticky bits kept; devices, FIFOs and sockets skipped. It works
// on directory descriptors (openat with O_NOFOLLOW below rel, which is resolved
// inside the image), so no symlink of the image leads it anywhere, and stops past
// [MaxWorkspaceEntries] entries.
func copyTree(src *os.Root, rel, dst string, uid, gid int) error {
	sd, err := src.Open(rel)
	if err != nil {
		return err
	}
	defer sd.Close()
	dd, err := os.OpenFile(dst, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer dd.Close()
	n := 0
	return copyDir(sd, int(dd.Fd()), uid, gid, &n)
}

// copyDir copies the entries of the directory sd into the directory dfd.
func copyDir(sd *os.File, dfd, uid, gid int, n *int) error {
	names, err := sd.Readdirnames(-1)
	if err != nil {
		return err
	}
	sfd := int(sd.Fd())
	for _, name := range names {
		if *n++; *n > MaxWorkspaceEntries {
			return fmt.Errorf("more than %d entries", MaxWorkspaceEntries)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		mode := st.Mode & 0o7777
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
				return err
			}
			if err := copySubdir(sfd, dfd, name, mode, uid, gid, n); err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := readlinkat(sfd, name)
			if err != nil {
				return err
			}
			if err := unix.Symlinkat(target, dfd, name); err != nil {
				return err
			}
			if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := copyRegular(sfd, dfd, name, mode, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

func copySubdir(sfd, dfd int, name string, mode uint32, uid, gid int, n *int) error {
	cs, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	sub := os.NewFile(uintptr(cs), name)
	defer sub.Close()
	cd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cd)
	if err := copyDir(sub, cd, uid, gid, n); err != nil {
		return err
	}
	if err := unix.Fchown(cd, uid, gid); err != nil {
		return err
	}
	return unix.Fchmod(cd, mode)
}

func copyRegular(sfd, dfd int, name string, mode uint32, uid, gid int) error {
	in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	inf := os.NewFile(uintptr(in), name)
	defer inf.Close()
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	outf := os.NewFile(uintptr(out), name)
	defer outf.Close()
	if _, err := io.Copy(outf, inf); err != nil {
		return err
	}
	if err := unix.Fchown(out, uid, gid); err != nil {
		return err
	}
	return unix.Fchmod(out, mode) // after the chown, which clears setuid and setgid
}

func readlinkat(dfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// unmountImage detaches an image sandbox's mounts (each may be absent).
func unmountImage(dir string) error {
	var errs []error
	for _, m := range imageMounts {
		errs = append(errs, unmountWorkspace(filepath.Join(dir, m)))
	}
	return errors.Join(errs...)
}

// noMountBelow reports an error when a mount point remains under dir, so that a
// removal never descends into a file system it does not own (the image's files).
func noMountBelow(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	prefix := dir + "/"
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], prefix)) {
			return fmt.Errorf("%s is still mounted", f[4])
		}
	}
	return nil
}
