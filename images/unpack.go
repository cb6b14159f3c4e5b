package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxSymlinkHops bounds how many symlinks resolving one path may follow, as the
// kernel's ELOOP limit does (40).
const maxSymlinkHops = 40

// whiteoutPrefix and opaqueMarker are the OCI layer whiteouts.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// unpacker applies layers, bottom first, to one root directory. It never follows a
// symlink of the image out of the root: parent directories are resolved the way a
// chroot would (an absolute symlink starts again at the root, ".." stops at it), and
// every operation then goes through an [os.Root], which refuses any path that would
// still leave it.
type unpacker struct {
	root     *os.Root
	chown    bool // chown every entry to uid/gid (the process is root)
	uid, gid int
	limit    int64 // bytes of file content allowed in total; <= 0: no limit
	written  int64
	skipped  int // device nodes, FIFOs and other special files
	dirTimes map[string]time.Time
	// Caches of the tree as it is, dropped whenever anything is removed from it:
	// directories known to be real directories (not symlinks), and roots opened on
	// some of them, so that writing a file costs one openat, not one per component.
	dirs  map[string]bool
	roots map[string]*os.Root
	buf   []byte
	// per layer: the paths this layer wrote (whiteouts spare them) and their ancestors
	created   map[string]bool
	ancestors map[string]bool
}

func newUnpacker(root *os.Root, chown bool, uid, gid int, limit int64) *unpacker {
	return &unpacker{root: root, chown: chown, uid: uid, gid: gid, limit: limit,
		dirTimes: map[string]time.Time{}, dirs: map[string]bool{}, roots: map[string]*os.Root{},
		buf: make([]byte, 1<<20)}
}

// maxDirRoots bounds the directory roots (descriptors) an unpacker keeps open.
const maxDirRoots = 64

// at returns a root opened on p's directory, and p's last component.
func (u *unpacker) at(p string) (*os.Root, string, error) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return u.root, base, nil
	}
	if r := u.roots[dir]; r != nil {
		return r, base, nil
	}
	r, err := u.root.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	if len(u.roots) >= maxDirRoots {
		u.closeRoots()
	}
	u.roots[dir] = r
	return r, base, nil
}

func (u *unpacker) closeRoots() {
	for k, r := range u.roots {
		r.Close()
		delete(u.roots, k)
	}
}

// forget drops what the unpacker knows of the tree: something was removed.
func (u *unpacker) forget() {
	u.closeRoots()
	clear(u.dirs)
}

// close releases the directory roots.
func (u *unpacker) close() { u.closeRoots() }

// layer applies one uncompressed layer stream.
func (u *unpacker) layer(r io.Reader) error {
	u.created = map[string]bool{}
	u.ancestors = map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the layer's tar stream: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
}

// cleanName turns a tar entry name into a path relative to the root: a leading "/"
// is dropped (layers are relative to the root by definition); a name that leaves the
// root through ".." is refused.
func cleanName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", errors.New("name holds a NUL byte")
	}
	p := path.Clean("/" + name)
	// Clean of a rooted path removes leading "..", so compare against the raw
	// components: a ".." that would climb above the root is an attack, not a name.
	depth := 0
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", errors.New("name leaves the root through \"..\"")
			}
		default:
			depth++
		}
	}
	return strings.TrimPrefix(p, "/"), nil // "" is the root itself
}

// resolve returns the path of p's parent directory with every symlink in it
// resolved inside the root, joined with p's last component (never followed).
func (u *unpacker) resolveParent(p string) (string, error) {
	dir, base := path.Split(p)
	rdir, err := u.resolve(dir)
	if err != nil {
		return "", err
	}
	return path.Join(rdir, base), nil
}

// resolve resolves every symlink in p (relative to the root) inside the root, as
// the kernel would after chroot(2): a relative target continues from the link's
// directory, an absolute one from the root, and ".." stops at the root. Components
// that do not exist are kept as they are.
func (u *unpacker) resolve(p string) (string, error) {
	todo := strings.Split(p, "/")
	out, hops := "", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			out = path.Dir("/" + out)[1:]
			continue
		}
		next := path.Join(out, c)
		if u.dirs[next] {
			out = next
			continue
		}
		fi, err := u.root.Lstat(next)
		if err == nil && fi.IsDir() {
			u.dirs[next] = true
		}
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			out = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", fmt.Errorf("too many symlinks resolving %q", p)
		}
		target, err := u.root.Readlink(next)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			out = ""
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return out, nil
}

// entry applies one tar entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	base := path.Base(name)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(name)
	}
	if name == "" { // the root directory itself
		if hdr.Typeflag == tar.TypeDir {
			return u.dirMode(".", hdr)
		}
		return errors.New("the root must be a directory")
	}
	p, err := u.resolveParent(name)
	if err != nil {
		return err
	}
	if dir := path.Dir(p); dir != "." {
		if err := u.mkdirAll(dir); err != nil {
			return err
		}
	}
	u.markCreated(p)

	switch hdr.Typeflag {
	case tar.TypeDir:
		fi, err := u.root.Lstat(p)
		if err == nil && !fi.IsDir() {
			if err := u.root.Remove(p); err != nil {
				return err
			}
			u.forget()
			err = fs.ErrNotExist
		}
		if errors.Is(err, fs.ErrNotExist) {
			if err := u.root.Mkdir(p, 0o700); err != nil {
				return err
			}
			u.dirs[p] = true
		} else if err != nil {
			return err
		}
		return u.dirMode(p, hdr)
	case tar.TypeReg: // archive/tar reads the old TypeRegA as TypeReg (or TypeDir)
		if err := u.replace(p); err != nil {
			return err
		}
		return u.file(p, hdr, r)
	case tar.TypeSymlink:
		if err := u.replace(p); err != nil {
			return err
		}
		if strings.ContainsRune(hdr.Linkname, 0) {
			return errors.New("symlink target holds a NUL byte")
		}
		// os.Root.Symlink stores any target: it is only ever resolved inside the
		// sandbox, where this root is "/".
		d, base, err := u.at(p)
		if err != nil {
			return err
		}
		if err := d.Symlink(hdr.Linkname, base); err != nil {
			return err
		}
		if u.chown {
			return d.Lchown(base, u.uid, u.gid)
		}
		return nil
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
		}
		if target == "" {
			return fmt.Errorf("hard link to the root directory")
		}
		tp, err := u.resolveParent(target)
		if err != nil {
			return err
		}
		fi, err := u.root.Lstat(tp)
		if err != nil {
			return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
		}
		if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("hard link target %q is not a regular file", hdr.Linkname)
		}
		if tp == p {
			return nil // a link to itself: already there
		}
		if err := u.replace(p); err != nil {
			return err
		}
		return u.root.Link(tp, p)
	case tar.TypeXGlobalHeader:
		return nil // PAX defaults for the entries after it, which the reader applies
	default:
		// Character and block devices, FIFOs, sockets: the sandbox brings its own
		// minimal /dev, and a device node of an image is never made on the host.
		u.skipped++
		return nil
	}
}

// replace removes whatever is at p (a lower layer's file, symlink or directory), so
// that what the entry makes is new, never written through an existing symlink.
func (u *unpacker) replace(p string) error {
	d, base, err := u.at(p)
	if err != nil {
		return err
	}
	fi, err := d.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	u.forget()
	if fi.IsDir() {
		return u.root.RemoveAll(p)
	}
	return u.root.Remove(p)
}

// file writes a regular file's content.
func (u *unpacker) file(p string, hdr *tar.Header, r io.Reader) error {
	if u.limit > 0 && u.written+hdr.Size > u.limit {
		return fmt.Errorf("%w (%d bytes)", ErrTooLarge, u.limit)
	}
	d, base, err := u.at(p)
	if err != nil {
		return err
	}
	f, err := d.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = u.write(f, hdr, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write fills f (just made, empty) with the entry's content, then sets its owner,
// mode and times through the descriptor.
func (u *unpacker) write(f *os.File, hdr *tar.Header, r io.Reader) error {
	// io.Writer alone, so that the copy uses the unpacker's large buffer.
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, io.LimitReader(r, hdr.Size), u.buf)
	u.written += n
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("short file: %d of %d bytes", n, hdr.Size)
	}
	if u.chown {
		if err := f.Chown(u.uid, u.gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(fileMode(hdr)); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(hdr.ModTime.UnixNano())
	return unix.Futimes(int(f.Fd()), []unix.Timeval{tv, tv})
}

// shared are the group and other write bits: dropped from every entry, so that
// no host user but the tree's owner can change a root that every sandbox of the
// image, graders included, reads (inside a sandbox the root is read-only anyway,
// and /tmp a tmpfs of its own).
const shared = 0o022

// fileMode keeps an entry's permission bits but group and other write, drops
// setuid and setgid, and makes the file readable by its owner (the sandbox's uid).
func fileMode(hdr *tar.Header) fs.FileMode {
	m := fs.FileMode(hdr.Mode) & 0o777 &^ shared
	return m | 0o400
}

// dirMode sets a directory's mode (owner rwx always: the tree is the sandbox uid's,
// and the cache must be able to fill and remove it), owner and, at the end, mtime.
func (u *unpacker) dirMode(p string, hdr *tar.Header) error {
	if err := u.own(p); err != nil {
		return err
	}
	m := fs.FileMode(hdr.Mode)&0o777&^shared | 0o700
	if hdr.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if err := u.root.Chmod(p, m); err != nil {
		return err
	}
	u.dirTimes[p] = hdr.ModTime
	return nil
}

// mkdirAll makes the (already resolved) directory dir and its parents.
func (u *unpacker) mkdirAll(dir string) error {
	if u.dirs[dir] {
		return nil
	}
	fi, err := u.root.Lstat(dir)
	if err == nil {
		if fi.IsDir() {
			u.dirs[dir] = true
			return nil
		}
		return fmt.Errorf("%q is not a directory", dir)
	}
	if parent := path.Dir(dir); parent != "." {
		if err := u.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := u.root.Mkdir(dir, 0o755); err != nil {
		return err
	}
	u.dirs[dir] = true
	return u.own(dir)
}

func (u *unpacker) own(p string) error {
	if !u.chown {
		return nil
	}
	return u.root.Lchown(p, u.uid, u.gid)
}

// markCreated records that this layer wrote p, so whiteouts of the same layer
// spare it and its ancestors are known to hold something new.
func (u *unpacker) markCreated(p string) {
	u.created[p] = true
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		u.ancestors[d] = true
	}
}

// whiteout applies ".wh.<name>" (remove name from the lower layers) and
// ".wh..wh..opq" (remove everything the lower layers put in the directory).
func (u *unpacker) whiteout(name string) error {
	dir, base := path.Split(name)
	rdir, err := u.resolve(dir)
	if err != nil {
		return err
	}
	if base == opaqueMarker {
		return u.opaque(rdir)
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return fmt.Errorf("bad whiteout %q", name)
	}
	p := path.Join(rdir, target)
	if u.created[p] {
		return nil
	}
	if _, err := u.root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	u.forget()
	return u.root.RemoveAll(p)
}

// opaque empties dir of everything this layer did not write.
func (u *unpacker) opaque(dir string) error {
	if dir == "" {
		dir = "."
	}
	fi, err := u.root.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	f, err := u.root.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		switch {
		case u.created[p]:
		case u.ancestors[p]:
			// New things below a lower layer's directory: keep them, drop the rest.
			if err := u.opaque(p); err != nil {
				return err
			}
		default:
			u.forget()
			if err := u.root.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish sets directory mtimes, which every entry written below them changed.
func (u *unpacker) finish() error {
	for p, t := range u.dirTimes {
		if _, err := u.root.Lstat(p); err != nil {
			continue // removed by a later layer's whiteout
		}
		if err := u.root.Chtimes(p, t, t); err != nil {
			return err
		}
	}
	return nil
}
