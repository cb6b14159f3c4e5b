package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/agentic-opd/agenticopd/internal/filesearch"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// The file ops go through an [os.Root] opened on the workspace, as the bubblewrap
// sandbox's host-side file methods do, so they refuse the same paths: "..", absolute
// paths, and symlinks that lead out of the workspace. They open without blocking and
// refuse FIFOs, sockets and devices, so a planted FIFO cannot block them.

// readChunk is the size of the data frames of a read.
const readChunk = 256 << 10

func infoOf(fi fs.FileInfo) *podproto.FileInfo {
	return &podproto.FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime().UnixNano()}
}

func checkName(name string, allowRoot bool) error {
	if name == "." && allowRoot {
		return nil
	}
	if name == "" || !filepath.IsLocal(name) {
		return &podproto.Error{Kind: podproto.KindInvalid, Message: "path is not inside the workspace"}
	}
	return nil
}

func readFile(req podproto.ReadRequest, out *frameOut) podproto.Result {
	const op = podproto.OpRead
	if err := checkName(req.Path, req.AllowDir); err != nil {
		return fail(op, req.Path, err)
	}
	if req.Offset < 0 || req.Limit < 0 {
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindInvalid, Message: "negative offset or limit"})
	}
	root, err := os.OpenRoot(req.Root)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer root.Close()
	f, err := root.OpenFile(req.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(op, req.Path, err)
	}
	switch {
	case fi.IsDir() && req.AllowDir:
		return podproto.Result{Info: infoOf(fi)}
	case !fi.Mode().IsRegular():
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindNotRegular, Message: "not a regular file"})
	case req.Max > 0 && fi.Size() > req.Max:
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindTooLarge, Message: "the file is larger than the cap of the call"})
	}
	r := io.NewSectionReader(f, req.Offset, req.Limit)
	buf := make([]byte, min(readChunk, max(req.Limit, 1)))
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := out.frame(podproto.FrameData, buf[:n]); werr != nil {
				return fail(op, req.Path, werr)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(op, req.Path, err)
		}
	}
	return podproto.Result{Info: infoOf(fi)}
}

func writeFile(req podproto.WriteRequest, stdin io.Reader) podproto.Result {
	const op = podproto.OpWrite
	if err := checkName(req.Path, false); err != nil {
		return fail(op, req.Path, err)
	}
	root, err := os.OpenRoot(req.Root)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer root.Close()
	name := path.Clean(req.Path)
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fail(op, req.Path, err)
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(op, req.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindNotRegular, Message: "not a regular file"})
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindHardLinked, Message: "the file has other hard links"})
	}
	if err := f.Truncate(0); err != nil {
		return fail(op, req.Path, err)
	}
	fr := podproto.NewFrameReader(stdin, podproto.StdinKinds)
	var written int64
	for {
		kind, b, err := fr.Next()
		if err != nil {
			return fail(op, req.Path, errors.New("the content ended before its end frame: "+err.Error()))
		}
		if kind == podproto.FrameStdinEnd {
			break
		}
		written += int64(len(b))
		if req.Max > 0 && written > req.Max {
			return fail(op, req.Path, &podproto.Error{Kind: podproto.KindTooLarge, Message: "more bytes than the cap of the call"})
		}
		if _, err := f.Write(b); err != nil {
			return fail(op, req.Path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fail(op, req.Path, err)
	}
	return podproto.Result{}
}

func statFile(req podproto.PathRequest) podproto.Result {
	const op = podproto.OpStat
	if err := checkName(req.Path, true); err != nil {
		return fail(op, req.Path, err)
	}
	root, err := os.OpenRoot(req.Root)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer root.Close()
	fi, err := root.Stat(req.Path)
	if err != nil {
		return fail(op, req.Path, err)
	}
	return podproto.Result{Info: infoOf(fi)}
}

func readDir(req podproto.PathRequest, out *frameOut) podproto.Result {
	const op = podproto.OpReadDir
	if err := checkName(req.Path, true); err != nil {
		return fail(op, req.Path, err)
	}
	root, err := os.OpenRoot(req.Root)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer root.Close()
	f, err := root.OpenFile(req.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail(op, req.Path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return fail(op, req.Path, &podproto.Error{Kind: podproto.KindNotDir, Message: "not a directory"})
	}
	max := req.Max
	if max <= 0 {
		max = podproto.MaxWorkspaceEntries
	}
	var infos []podproto.FileInfo
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				continue // vanished
			}
			infos = append(infos, *infoOf(fi))
		}
		if len(infos) > max {
			return fail(op, req.Path, &podproto.Error{Kind: podproto.KindTooLarge, Message: "the directory has more entries than a listing holds"})
		}
		if errors.Is(err, io.EOF) || len(entries) == 0 {
			break
		}
		if err != nil {
			return fail(op, req.Path, err)
		}
	}
	if infos == nil {
		infos = []podproto.FileInfo{}
	}
	b, err := json.Marshal(infos)
	if err != nil {
		return fail(op, req.Path, err)
	}
	if err := out.frame(podproto.FrameData, b); err != nil {
		return fail(op, req.Path, err)
	}
	return podproto.Result{}
}

// search runs search_files' search over the workspace, the code the host runs.
func search(req podproto.SearchRequest, out *frameOut) podproto.Result {
	const op = podproto.OpSearch
	root, err := os.OpenRoot(req.Root)
	if err != nil {
		return fail(op, "", err)
	}
	defer root.Close()
	r := filesearch.Search(context.Background(), root.FS(), filesearch.Query(req.Query))
	b, err := json.Marshal(rollout.SearchResult(r))
	if err != nil {
		return fail(op, "", err)
	}
	if err := out.frame(podproto.FrameData, b); err != nil {
		return fail(op, "", err)
	}
	return podproto.Result{}
}
