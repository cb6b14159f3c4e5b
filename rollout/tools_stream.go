package rollout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"
)

// The file tools run on the host, in the library's process, so whatever the file's
// size they hold a bounded amount of it: read_file streams the file up to the lines
// asked for, patch refuses files over a cap, search_files streams each file and
// reads directories in batches. Every cap is named in the error that refuses.
const (
	// readMaxScan is how far into a file read_file reads: lines past it cannot be
	// read with read_file, and total_lines counts the lines before it.
	readMaxScan = 64 << 20
	// readMaxLineBytes is how much of one line read_file keeps; the rest of a
	// longer line is cut and the cut is marked.
	readMaxLineBytes = 4096
	// readBufSize is the read buffer of read_file and search_files.
	readBufSize = 64 << 10
	// patchMaxFileSize is the largest file patch edits, before and after the edit.
	patchMaxFileSize = 1 << 20
	// searchMaxEntries bounds the workspace entries search_files visits;
	// searchMaxDepth the directory depth it descends to.
	searchMaxEntries = 200000
	searchMaxDepth   = 64
	// searchDirBatch is how many directory entries search_files holds at a time.
	searchDirBatch = 256
	// walkCheckEntries is how often (in entries) a walk checks its deadline.
	walkCheckEntries = 256
)

// openRegular opens a regular file of fsys for reading; anything else (a directory,
// a FIFO the agent planted) is refused before it is opened, so it cannot block.
func openRegular(fsys fs.FS, name string) (fs.File, fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, nil, fmt.Errorf("path %q leaves the workspace", name)
	}
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, fi, nil
}

// lineReader reads a file line by line, keeping at most keep bytes of each line and
// reading no more than maxScan bytes in all.
type lineReader struct {
	r       *bufio.Reader
	keep    int
	maxScan int64
	scanned int64
	// capped is set when reading stopped at maxScan with more of the file left.
	capped bool
	// m, when set, counts the bytes read against the call's budget and deadline.
	m *meter
}

func newLineReader(r io.Reader, keep int, maxScan int64) *lineReader {
	// One byte over maxScan tells a file of exactly maxScan bytes from a longer one.
	return &lineReader{r: bufio.NewReaderSize(io.LimitReader(r, maxScan+1), readBufSize), keep: keep, maxScan: maxScan}
}

// next returns the next line without its end (kept only when want), the bytes of it
// cut, and false at the end of the file or of the scan.
func (l *lineReader) next(want bool, dst []byte) ([]byte, int64, bool, error) {
	var cut int64
	got := false
	if l.capped {
		return dst, 0, false, nil
	}
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(frag) > 0 {
			if l.scanned+int64(len(frag)) > l.maxScan {
				// The scan ends inside this line: keep what is in it.
				l.capped = true
				frag = frag[:l.maxScan-l.scanned]
				err = io.EOF
			}
			got = got || len(frag) > 0
			l.scanned += int64(len(frag))
			if merr := l.m.scan(int64(len(frag))); merr != nil {
				return dst, cut, got, merr
			}
		}
		body := bytes.TrimSuffix(frag, []byte{'\n'})
		if want {
			room := l.keep - len(dst)
			if room > 0 {
				dst = append(dst, body[:min(room, len(body))]...)
			}
			cut += int64(max(0, len(body)-max(room, 0)))
		}
		switch {
		case err == nil:
			return dst, cut, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return dst, cut, got, nil
		default:
			return dst, cut, got, err
		}
	}
}

// count reads the rest of the scan and returns how many lines it holds (a last line
// without a newline counts), without looking at them one by one.
func (l *lineReader) count() (int, error) {
	if l.capped {
		return 0, nil
	}
	buf := make([]byte, readBufSize)
	n, atLineStart := 0, true
	for {
		k, err := l.r.Read(buf)
		if k > 0 {
			if l.scanned+int64(k) > l.maxScan {
				k = int(l.maxScan - l.scanned)
				l.capped = true
			}
			n += bytes.Count(buf[:k], []byte{'\n'})
			if k > 0 {
				atLineStart = buf[k-1] == '\n'
			}
			l.scanned += int64(k)
			if merr := l.m.scan(int64(k)); merr != nil {
				return 0, merr
			}
		}
		if l.capped || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if !atLineStart {
		n++
	}
	return n, nil
}

// readLines reads lines [offset, offset+limit) of r (1-based), numbered as
// read_file shows them, and counts the file's lines up to readMaxScan.
func readLines(r io.Reader, offset, limit int) (content string, total int, capped bool, err error) {
	return readLinesMetered(r, offset, limit, nil)
}

// readLinesMetered is readLines within m's budget and deadline (none when m is nil).
func readLinesMetered(r io.Reader, offset, limit int, m *meter) (content string, total int, capped bool, err error) {
	lr := newLineReader(r, readMaxLineBytes, readMaxScan)
	lr.m = m
	var b strings.Builder
	var line []byte
	for n := 1; ; n++ {
		if n == offset+limit {
			rest, err := lr.count()
			if err != nil {
				return "", 0, false, err
			}
			total += rest
			break
		}
		want := n >= offset
		var cut int64
		var ok bool
		line, cut, ok, err = lr.next(want, line[:0])
		if err != nil {
			return "", 0, false, err
		}
		if !ok {
			break
		}
		total = n
		if !want {
			continue
		}
		text := strings.TrimRight(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
		if cut > 0 {
			// Never end the kept part inside a character.
			for len(text) > 0 && !utf8.ValidString(text) {
				text = text[:len(text)-1]
			}
			text += fmt.Sprintf("…[%d bytes of this line cut]", cut)
		}
		fmt.Fprintf(&b, "%6d|%s\n", n, text)
	}
	return b.String(), total, lr.capped, nil
}

// walkFiles calls fn for every regular file under root in fsys, depth first, without
// ever holding more than searchDirBatch entries of a directory. Directories for which
// skipDir is true are not entered. It stops after searchMaxEntries entries and does
// not go deeper than searchMaxDepth; it reports whether it stopped early. Every
// entry counts against m's deadline.
func walkFiles(fsys fs.FS, root string, skipDir func(name string) bool, m *meter, fn func(path string) error) (bool, error) {
	type level struct {
		dir   string
		f     fs.ReadDirFile
		batch []fs.DirEntry // entries read and not yet visited
	}
	open := func(dir string) (fs.ReadDirFile, error) {
		f, err := fsys.Open(dir)
		if err != nil {
			return nil, err
		}
		d, ok := f.(fs.ReadDirFile)
		if !ok {
			f.Close()
			return nil, fmt.Errorf("%s is not a directory", dir)
		}
		return d, nil
	}
	d, err := open(root)
	if err != nil {
		return false, err
	}
	stack := []*level{{dir: root, f: d}}
	defer func() {
		for _, l := range stack {
			l.f.Close()
		}
	}()
	visited := 0
	stopped := false
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		if len(top.batch) == 0 {
			entries, err := top.f.ReadDir(searchDirBatch)
			if len(entries) == 0 || (err != nil && !errors.Is(err, io.EOF)) {
				top.f.Close()
				stack = stack[:len(stack)-1]
				continue
			}
			// Sorted within a batch: a directory of up to searchDirBatch entries is
			// searched in name order.
			slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			top.batch = entries
		}
		e := top.batch[0]
		top.batch = top.batch[1:]
		visited++
		if visited > searchMaxEntries {
			return true, nil
		}
		if visited%walkCheckEntries == 0 {
			if err := m.expired(); err != nil {
				return false, err
			}
		}
		p := e.Name()
		if top.dir != "." {
			p = top.dir + "/" + p
		}
		switch {
		case e.IsDir():
			if skipDir(e.Name()) {
				continue
			}
			if len(stack) >= searchMaxDepth {
				stopped = true
				continue
			}
			if sd, err := open(p); err == nil {
				stack = append(stack, &level{dir: p, f: sd})
			}
		case e.Type().IsRegular():
			if err := fn(p); err != nil {
				return false, err
			}
		}
	}
	return stopped, nil
}
