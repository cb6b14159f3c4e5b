package podproto

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// The file calls. The helper resolves every path beneath the workspace through an
// [os.Root], as the host-side file tools of the bubblewrap sandbox do, so the
// refusals are the same: a symlink out of the workspace, "..", an absolute path
// ([fs.ErrInvalid] or the root's "path escapes from parent"), a FIFO, socket or
// device ([ErrNotRegular]), a file with other hard links on write ([ErrHardLinked]).

// readChunk is how much of a file one read exec of the fs.FS fetches.
const readChunk = 4 << 20

// checkName refuses a name that is not a local path and returns it cleaned.
func checkName(op, name string) (string, error) {
	p := path.Clean(name)
	if name == "" || !localPath(p) {
		return "", &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: path is not inside the workspace", fs.ErrInvalid)}
	}
	return p, nil
}

// ReadFile reads the workspace file name (slash-separated, relative to the
// workspace). A file larger than Config.MaxReadFile is refused ([ErrTooLarge]), and
// so is anything but a regular file.
func (c *Client) ReadFile(ctx context.Context, name string) ([]byte, error) {
	p, err := checkName("read", name)
	if err != nil {
		return nil, err
	}
	data, _, err := c.read(ctx, ReadRequest{Root: c.cfg.Root, Path: p, Limit: c.cfg.MaxReadFile, Max: c.cfg.MaxReadFile})
	return data, err
}

// read runs one OpRead and returns the bytes and the file's info.
func (c *Client) read(ctx context.Context, req ReadRequest) ([]byte, *FileInfo, error) {
	var data []byte
	handle := func(kind byte, b []byte) error {
		if kind != FrameData {
			return fmt.Errorf("%w: an unexpected frame of kind %q", ErrFrame, kind)
		}
		if int64(len(data)+len(b)) > req.Limit {
			return fmt.Errorf("%w: more data than the %d bytes asked for", ErrFrame, req.Limit)
		}
		data = append(data, b...)
		return nil
	}
	res, err := c.call(ctx, OpRead, req, nil, handle)
	if err != nil {
		return nil, nil, err
	}
	if res.Info == nil {
		return nil, nil, fmt.Errorf("podproto: read %s: %w (the result has no file info)", req.Path, ErrNoResult)
	}
	return data, res.Info, nil
}

// WriteFile writes the workspace file name, creating or truncating it and creating
// missing parent directories. Data over Config.MaxReadFile is refused.
func (c *Client) WriteFile(ctx context.Context, name string, data []byte) error {
	p, err := checkName("write", name)
	if err != nil {
		return err
	}
	if int64(len(data)) > c.cfg.MaxReadFile {
		return &fs.PathError{Op: "write", Path: name, Err: fmt.Errorf("%w: %d bytes, over the %d allowed", ErrTooLarge, len(data), c.cfg.MaxReadFile)}
	}
	stdin := newHeldStdin(stdinFrames(data))
	defer close(stdin.release)
	_, err = c.call(ctx, OpWrite, WriteRequest{Root: c.cfg.Root, Path: p, Max: c.cfg.MaxReadFile}, stdin, nil)
	return err
}

// Stat describes the workspace entry name, following symlinks that stay inside the
// workspace.
func (c *Client) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	res, err := c.call(ctx, OpStat, PathRequest{Root: c.cfg.Root, Path: name}, nil, nil)
	if err != nil {
		return nil, err
	}
	if res.Info == nil {
		return nil, fmt.Errorf("podproto: stat %s: %w (the result has no file info)", name, ErrNoResult)
	}
	return fileInfo{*res.Info}, nil
}

// ReadDir lists the workspace directory name, sorted by name; a directory of more
// than [MaxWorkspaceEntries] entries is refused ([ErrTooLarge]).
func (c *Client) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	var raw []byte
	handle := func(kind byte, b []byte) error {
		if kind != FrameData || len(raw)+len(b) > 64<<20 {
			return fmt.Errorf("%w: an unexpected listing frame", ErrFrame)
		}
		raw = append(raw, b...)
		return nil
	}
	if _, err := c.call(ctx, OpReadDir, PathRequest{Root: c.cfg.Root, Path: name, Max: MaxWorkspaceEntries}, nil, handle); err != nil {
		return nil, err
	}
	var infos []FileInfo
	if err := json.Unmarshal(raw, &infos); err != nil {
		return nil, fmt.Errorf("podproto: readdir %s: %w (%w: %v)", name, ErrNoResult, ErrFrame, err)
	}
	entries := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		entries[i] = fs.FileInfoToDirEntry(fileInfo{fi})
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Restore gives the workspace's owner back what the agent's code took from it, as
// bwrap's Sandbox.Restore does (chmod -R u+rwX by directory descriptors, no symlink
// followed, at most [MaxWorkspaceEntries] entries), in the pod. An error wrapping
// [rollout.ErrRestoreBudget] says the walk did not end within [RestoreTimeout].
func (c *Client) Restore(ctx context.Context) error {
	_, err := c.call(ctx, OpRestore, RestoreRequest{Root: c.cfg.Root, Budget: RestoreTimeout, MaxEntries: MaxWorkspaceEntries}, nil, nil)
	return err
}

var _ rollout.Searcher = (*Client)(nil)

// SearchFiles implements [rollout.Searcher]: the helper runs search_files' search
// in the pod and only its result crosses the exec.
func (c *Client) SearchFiles(ctx context.Context, q rollout.SearchQuery) (rollout.SearchResult, error) {
	var raw []byte
	handle := func(kind byte, b []byte) error {
		if kind != FrameData || len(raw)+len(b) > 16<<20 {
			return fmt.Errorf("%w: an unexpected search frame", ErrFrame)
		}
		raw = append(raw, b...)
		return nil
	}
	if _, err := c.call(ctx, OpSearch, SearchRequest{Root: c.cfg.Root, Query: q}, nil, handle); err != nil {
		return rollout.SearchResult{}, err
	}
	var r rollout.SearchResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("podproto: search: %w (%w: %v)", ErrNoResult, ErrFrame, err)
	}
	return r, nil
}

// fileInfo is a FileInfo as an fs.FileInfo.
type fileInfo struct{ fi FileInfo }

func (f fileInfo) Name() string       { return f.fi.Name }
func (f fileInfo) Size() int64        { return f.fi.Size }
func (f fileInfo) Mode() fs.FileMode  { return f.fi.Mode }
func (f fileInfo) ModTime() time.Time { return time.Unix(0, f.fi.ModTime) }
func (f fileInfo) IsDir() bool        { return f.fi.Mode.IsDir() }
func (f fileInfo) Sys() any           { return nil }

// FS is a read-only view of the workspace over the helper: [fs.StatFS],
// [fs.ReadDirFS] and [fs.ReadFileFS], each call one exec bounded by
// Config.FileTimeout (a file's Read fetches it 4 MiB per exec). Opening a FIFO,
// socket or device fails with [ErrNotRegular]. Walking a tree through it costs one
// exec per file and directory: search_files uses [Client.SearchFiles] instead.
func (c *Client) FS() fs.FS { return podFS{c} }

type podFS struct{ c *Client }

var (
	_ fs.StatFS     = podFS{}
	_ fs.ReadDirFS  = podFS{}
	_ fs.ReadFileFS = podFS{}
)

func (p podFS) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.c.cfg.FileTimeout)
}

func (p podFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	ctx, cancel := p.ctx()
	defer cancel()
	data, fi, err := p.c.read(ctx, ReadRequest{Root: p.c.cfg.Root, Path: name, Limit: readChunk, AllowDir: true})
	if err != nil {
		return nil, err
	}
	f := &podFile{fs: p, name: name, info: fileInfo{*fi}, buf: data, eof: int64(len(data)) < readChunk}
	return f, nil
}

func (p podFS) Stat(name string) (fs.FileInfo, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Stat(ctx, name)
}

func (p podFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.ReadDir(ctx, name)
}

func (p podFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.ReadFile(ctx, name)
}

// podFile is an open file or directory of the FS. A file holds the chunk read last;
// a directory lists itself on the first ReadDir.
type podFile struct {
	fs     podFS
	name   string
	info   fileInfo
	buf    []byte
	off    int64 // the file offset of buf[0]
	eof    bool  // buf holds the file's end
	closed bool
	listed bool
	dir    []fs.DirEntry
}

func (f *podFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *podFile) Read(b []byte) (int, error) {
	switch {
	case f.closed:
		return 0, fs.ErrClosed
	case f.info.IsDir():
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: ErrNotRegular}
	}
	if len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		ctx, cancel := f.fs.ctx()
		data, _, err := f.fs.c.read(ctx, ReadRequest{Root: f.fs.c.cfg.Root, Path: f.name, Offset: f.off, Limit: readChunk})
		cancel()
		if err != nil {
			return 0, err
		}
		f.buf, f.eof = data, int64(len(data)) < readChunk
		if len(data) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(b, f.buf)
	f.buf = f.buf[n:]
	f.off += int64(n)
	return n, nil
}

func (f *podFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if f.closed {
		return nil, fs.ErrClosed
	}
	if !f.info.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: ErrNotDir}
	}
	if !f.listed {
		ctx, cancel := f.fs.ctx()
		entries, err := f.fs.c.ReadDir(ctx, f.name)
		cancel()
		if err != nil {
			return nil, err
		}
		f.dir, f.listed = entries, true
	}
	if n <= 0 {
		rest := f.dir
		f.dir = nil
		return rest, nil
	}
	if len(f.dir) == 0 {
		return nil, io.EOF
	}
	k := min(n, len(f.dir))
	batch := f.dir[:k]
	f.dir = f.dir[k:]
	return batch, nil
}

func (f *podFile) Close() error {
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	f.buf, f.dir = nil, nil
	return nil
}
