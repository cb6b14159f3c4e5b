package bwrap

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The file methods run on the host, with the library's privileges, so they go through
// an [os.Root] opened on the workspace: a symlink the sandboxed code planted cannot
// take them outside it ("path escapes from parent"). They also refuse FIFOs, sockets
// and devices, so a planted FIFO cannot block the host.

// ReadFile reads the workspace file name (a slash-separated path relative to the
// workspace root).
func (s *Sandbox) ReadFile(name string) ([]byte, error) {
	name, err := checkName("read", name)
	if err != nil {
		return nil, err
	}
	f, err := s.openRegular("read", name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile writes the workspace file name, creating or truncating it and creating
// missing parent directories. When the library runs as root, what it creates is
// owned by the sandbox uid so the sandboxed code can change it.
func (s *Sandbox) WriteFile(name string, data []byte) error {
	name, err := checkName("write", name)
	if err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		if err := s.mkdirAll(dir); err != nil {
			return err
		}
	}
	f, err := s.openRegular("write", name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := s.prepareWrite(f, name); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// prepareWrite refuses a file with other hard links (in unconfined mode the code
// could link a host file it can write into the workspace, and the host-side write
// would then change that file's owner), then truncates it and gives it to the
// sandbox uid.
func (s *Sandbox) prepareWrite(f *os.File, name string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return &fs.PathError{Op: "write", Path: name, Err: ErrHardLinked}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if s.f.asRoot {
		return f.Chown(s.f.cfg.UID, s.f.cfg.GID)
	}
	return nil
}

// mkdirAll creates dir and its parents inside the root, owned by the sandbox uid.
func (s *Sandbox) mkdirAll(dir string) error {
	if err := s.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !s.f.asRoot {
		return nil
	}
	for p := dir; p != "."; p = path.Dir(p) {
		if err := s.root.Lchown(p, s.f.cfg.UID, s.f.cfg.GID); err != nil {
			return err
		}
	}
	return nil
}

// openRegular opens name in the root without blocking and checks that it is a
// regular file.
func (s *Sandbox) openRegular(op, name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := s.root.OpenFile(name, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: op, Path: name, Err: ErrNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkName refuses names that are not local paths and returns the name cleaned
// (so "a/../b" does not need an "a").
func checkName(op, name string) (string, error) {
	if name == "" || !filepath.IsLocal(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: path is not inside the workspace", fs.ErrInvalid)}
	}
	return filepath.Clean(name), nil
}

// FS is a read-only view of the workspace through the same [os.Root]. It implements
// [fs.StatFS], [fs.ReadFileFS] and [fs.ReadDirFS]; opening a FIFO, socket or device
// fails with [ErrNotRegular].
func (s *Sandbox) FS() fs.FS { return workspaceFS{s} }

type workspaceFS struct{ s *Sandbox }

var (
	_ fs.StatFS     = workspaceFS{}
	_ fs.ReadFileFS = workspaceFS{}
	_ fs.ReadDirFS  = workspaceFS{}
)

func (w workspaceFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := w.s.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		err = &fs.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (w workspaceFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return w.s.root.Stat(name)
}

func (w workspaceFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrNotRegular}
	}
	return w.s.ReadFile(name)
}

func (w workspaceFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := w.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	entries, err := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}
