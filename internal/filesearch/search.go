package filesearch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The caps of one search, as search_files has them on the host.
const (
	MaxMatches      = 50        // matching lines shown
	MaxFileSize     = 1 << 20   // larger files are not searched
	MaxLineLen      = 200       // characters shown of a matching line
	MaxEntries      = 200000    // workspace entries visited
	MaxDepth        = 64        // directory depth descended to
	dirBatch        = 256       // directory entries held at a time
	walkCheck       = 256       // entries between deadline checks
	meterCheckBytes = 256 << 10 // bytes read between deadline checks
	readBufSize     = 64 << 10
)

// The caps a search can stop at (Result.Cap).
const (
	CapBytes    = "bytes"
	CapWork     = "work"
	CapDeadline = "deadline"
)

// Query is one search; its fields are those of rollout.SearchQuery.
type Query struct {
	Pattern  string        `json:"pattern"`
	Path     string        `json:"path"`
	Glob     string        `json:"glob,omitempty"`
	MaxBytes int64         `json:"max_bytes"`
	MaxWork  int64         `json:"max_work"`
	Timeout  time.Duration `json:"timeout"`
}

// Result is what a search found; its fields are those of rollout.SearchResult.
type Result struct {
	Matches  []string `json:"matches,omitempty"`
	Total    int      `json:"total"`
	TooLarge int      `json:"too_large,omitempty"`
	Windowed int      `json:"windowed,omitempty"`
	Stopped  bool     `json:"stopped,omitempty"`
	Bytes    int64    `json:"bytes"`
	Work     int64    `json:"work"`
	Largest  int64    `json:"largest"`
	Cap      string   `json:"cap,omitempty"`
	CapCost  int64    `json:"cap_cost,omitempty"`
	CapLen   int64    `json:"cap_len,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// stop is the error of a search stopped at a cap.
type stop struct {
	cap       string
	cost, len int64
}

func (s *stop) Error() string { return "stopped at the " + s.cap + " cap" }

// meter is one search's budget; it implements [Budget].
type meter struct {
	ctx                context.Context
	maxBytes, maxWork  int64
	bytes, work, large int64
	next               int64
}

func (m *meter) scan(n int64) error {
	m.bytes += n
	if m.bytes > m.maxBytes {
		return &stop{cap: CapBytes}
	}
	if m.bytes >= m.next {
		m.next = m.bytes + meterCheckBytes
		return m.Expired()
	}
	return nil
}

func (m *meter) Expired() error {
	if m.ctx.Err() != nil {
		return &stop{cap: CapDeadline}
	}
	return nil
}

func (m *meter) Match(cost, n int64) error {
	w := cost * (n + 1)
	if m.work+w > m.maxWork {
		return &stop{cap: CapWork, cost: cost, len: n}
	}
	m.work += w
	m.large = max(m.large, n)
	return nil
}

// Search runs the search of search_files over fsys (the workspace) as q says. The
// pattern must compile ([Compile]); a search that cannot begin (its directory is
// missing or not one) reports why in Result.Error, as the host-side search does.
func Search(ctx context.Context, fsys fs.FS, q Query) Result {
	lm, err := Compile(q.Pattern)
	if err != nil {
		return Result{Error: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	m := &meter{ctx: ctx, maxBytes: q.MaxBytes, maxWork: q.MaxWork, next: meterCheckBytes}
	root := q.Path
	if root == "" {
		root = "."
	}
	var r Result
	var line []byte
	stopped, err := walkFiles(fsys, root, m, func(p string) error {
		if q.Glob != "" && !globMatch(q.Glob, root, p) {
			return nil
		}
		f, fi, err := openRegular(fsys, p)
		if err != nil {
			return nil // vanished or unreadable: skipped
		}
		defer f.Close()
		if fi.Size() > MaxFileSize {
			r.TooLarge++
			return nil
		}
		lr := newLineReader(f, MaxFileSize, MaxFileSize, m)
		var found []string
		hits := 0
		var end error
		for n := 1; ; n++ {
			var ok bool
			line, ok, err = lr.next(line[:0])
			if err != nil || !ok {
				end = asStop(err)
				break
			}
			if bytes.IndexByte(line, 0) >= 0 {
				return nil // binary
			}
			show := len(r.Matches)+len(found) < MaxMatches
			hit, at, err := lm.Match(m, line, show)
			if err != nil {
				end = err
				break
			}
			if !hit {
				continue
			}
			if show {
				found = append(found, fmt.Sprintf("%s:%d: %s", p, n, Excerpt(line, at)))
			}
			hits++
		}
		if lr.capped {
			r.TooLarge++ // grew past the cap since the stat
			return nil
		}
		r.Matches = append(r.Matches, found...)
		r.Total += hits
		return end
	})
	r.Stopped, r.Windowed = stopped, lm.Windowed()
	r.Bytes, r.Work, r.Largest = m.bytes, m.work, m.large
	var s *stop
	switch {
	case errors.As(err, &s):
		r.Cap, r.CapCost, r.CapLen = s.cap, s.cost, s.len
	case err != nil:
		r.Error = err.Error()
	}
	return r
}

// asStop returns err when it is a cap (the search stops there); other read errors
// only end the file.
func asStop(err error) error {
	var s *stop
	if errors.As(err, &s) {
		return err
	}
	return nil
}

// Excerpt is what search_files shows of a matching line: at most MaxLineLen
// characters from at (where the match begins in a line matched in windows, else
// 0), each cut marked with "…".
func Excerpt(line []byte, at int) string {
	for at > 0 && at < len(line) && !utf8.RuneStart(line[at]) {
		at--
	}
	text := strings.TrimRight(string(line[at:]), "\r")
	if utf8.RuneCountInString(text) > MaxLineLen {
		text = string([]rune(text)[:MaxLineLen]) + "…"
	}
	if at > 0 {
		text = "…" + text
	}
	return text
}

// globMatch reports whether the file at workspace path p, found under the search
// root, matches glob: a glob without "/" (after any leading "**/") is matched
// against the file's name, at any depth; one with "/" against the path relative to
// the search root or to the workspace.
func globMatch(glob, root, p string) bool {
	for strings.HasPrefix(glob, "**/") {
		glob = glob[len("**/"):]
	}
	if !strings.Contains(glob, "/") {
		ok, _ := path.Match(glob, path.Base(p))
		return ok
	}
	if ok, _ := path.Match(glob, p); ok {
		return true
	}
	if rel, found := strings.CutPrefix(p, root+"/"); found && root != "." {
		ok, _ := path.Match(glob, rel)
		return ok
	}
	return false
}

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
// reading no more than maxScan bytes in all, every byte counted on m.
type lineReader struct {
	r       *bufio.Reader
	keep    int
	maxScan int64
	scanned int64
	capped  bool // reading stopped at maxScan with more of the file left
	m       *meter
}

func newLineReader(r io.Reader, keep int, maxScan int64, m *meter) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(io.LimitReader(r, maxScan+1), readBufSize), keep: keep, maxScan: maxScan, m: m}
}

// next returns the next line without its end and false at the end of the file or
// of the scan.
func (l *lineReader) next(dst []byte) ([]byte, bool, error) {
	got := false
	if l.capped {
		return dst, false, nil
	}
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(frag) > 0 {
			if l.scanned+int64(len(frag)) > l.maxScan {
				l.capped = true
				frag = frag[:l.maxScan-l.scanned]
				err = io.EOF
			}
			got = got || len(frag) > 0
			l.scanned += int64(len(frag))
			if merr := l.m.scan(int64(len(frag))); merr != nil {
				return dst, got, merr
			}
		}
		body := bytes.TrimSuffix(frag, []byte{'\n'})
		if room := l.keep - len(dst); room > 0 {
			dst = append(dst, body[:min(room, len(body))]...)
		}
		switch {
		case err == nil:
			return dst, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return dst, got, nil
		default:
			return dst, got, err
		}
	}
}

// walkFiles calls fn for every regular file under root in fsys, depth first,
// holding at most dirBatch entries of a directory at a time and sorting each batch
// by name. Directories whose name starts with "." and __pycache__ and node_modules
// are not entered. It stops after MaxEntries entries and does not go deeper than
// MaxDepth; it reports whether it stopped early.
func walkFiles(fsys fs.FS, root string, m *meter, fn func(path string) error) (bool, error) {
	type level struct {
		dir   string
		f     fs.ReadDirFile
		batch []fs.DirEntry
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
	skip := func(name string) bool {
		return strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules"
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
			entries, err := top.f.ReadDir(dirBatch)
			if len(entries) == 0 || (err != nil && !errors.Is(err, io.EOF)) {
				top.f.Close()
				stack = stack[:len(stack)-1]
				continue
			}
			slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			top.batch = entries
		}
		e := top.batch[0]
		top.batch = top.batch[1:]
		visited++
		if visited > MaxEntries {
			return true, nil
		}
		if visited%walkCheck == 0 {
			if err := m.Expired(); err != nil {
				return false, err
			}
		}
		p := e.Name()
		if top.dir != "." {
			p = top.dir + "/" + p
		}
		switch {
		case e.IsDir():
			if skip(e.Name()) {
				continue
			}
			if len(stack) >= MaxDepth {
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
