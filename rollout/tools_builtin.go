package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/chat"
)

// The built-in tools: terminal, read_file, write_file, patch and search_files.

// terminal

type terminalTool struct{ cfg ToolsConfig }

func (terminalTool) Definition() chat.Tool {
	return definition("terminal",
		"Run a shell command in the workspace (the current directory) and return its combined stdout and stderr and its exit code.",
		`{"type":"object","properties":{`+
			`"command":{"type":"string","description":"The shell command to run."},`+
			`"timeout":{"type":"integer","minimum":1,"description":"Timeout in seconds (default 120)."}},`+
			`"required":["command"]}`)
}

type terminalResult struct {
	Output   string `json:"output"`
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error"`
}

func (t terminalTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
		Timeout *int   `json:"timeout"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return errorResult("terminal: %v", err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return errorResult(`terminal: "command" is required`)
	}
	timeout := t.cfg.TerminalTimeout
	if a.Timeout != nil {
		if *a.Timeout < 1 {
			return errorResult(`terminal: "timeout" must be at least 1 second`)
		}
		timeout = min(time.Duration(*a.Timeout)*time.Second, t.cfg.MaxTerminalTimeout)
	}
	// "exec 2>&1" makes stderr follow stdout in order, as in a terminal.
	res, err := sb.Run(ctx, Command{Shell: "exec 2>&1\n" + a.Command, Timeout: timeout})
	if err != nil {
		return jsonResult(terminalResult{ExitCode: -1, Error: fmt.Sprintf("the sandbox could not run the command: %v", err)})
	}
	out := string(res.Stdout) + string(res.Stderr)
	r := terminalResult{
		Output:   capText(strings.TrimRight(out, " \t\r\n"), t.cfg.MaxOutputChars),
		ExitCode: res.ExitCode,
	}
	var notes []string
	if res.TimedOut {
		notes = append(notes, fmt.Sprintf("command timed out after %s and was killed", timeout))
	}
	if res.OutputKilled {
		notes = append(notes, "command was killed for writing too much output")
	} else if res.OutputTruncated {
		notes = append(notes, "output was truncated")
	}
	r.Error = strings.Join(notes, "; ")
	return jsonResult(r)
}

// read_file

type readFileTool struct{ cfg ToolsConfig }

const (
	readDefaultLimit = 500
	readMaxLimit     = 2000
)

func (readFileTool) Definition() chat.Tool {
	return definition("read_file",
		"Read a text file of the workspace. Lines are returned numbered as \"LINE_NUMBER|CONTENT\".",
		`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"File path, relative to the workspace (the current directory) or absolute under /workspace."},`+
			`"offset":{"type":"integer","minimum":1,"description":"First line to read, 1-based (default 1)."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":2000,"description":"Number of lines to read (default 500)."}},`+
			`"required":["path"]}`)
}

func (t readFileTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	var a struct {
		Path   string `json:"path"`
		Offset *int   `json:"offset"`
		Limit  *int   `json:"limit"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return errorResult("read_file: %v", err)
	}
	p, err := cleanPath(sb, a.Path)
	if err != nil {
		return errorResult("read_file: %v", err)
	}
	offset, limit := 1, readDefaultLimit
	if a.Offset != nil {
		if *a.Offset < 1 {
			return errorResult(`read_file: "offset" must be at least 1`)
		}
		offset = *a.Offset
	}
	if a.Limit != nil {
		if *a.Limit < 1 {
			return errorResult(`read_file: "limit" must be at least 1`)
		}
		limit = min(*a.Limit, readMaxLimit)
	}
	m, cancel, err := t.cfg.begin(ctx, readMaxScan, 0)
	if err != nil {
		return errorResult("read_file: %v", err)
	}
	defer cancel()
	defer m.end()
	f, _, err := openRegular(sb.FS(), p)
	if err != nil {
		return errorResult("read_file: %v", err)
	}
	defer f.Close()
	content, total, capped, err := readLinesMetered(f, offset, limit, m)
	if err != nil {
		return errorResult("read_file: %v", err)
	}
	if offset > total && total > 0 {
		if capped {
			return errorResult("read_file: line %d of %s lies beyond the first %d MiB, which is as far as read_file reads; "+
				"use the terminal (for example sed -n '%d,%dp' %s)", offset, p, readMaxScan>>20, offset, offset+limit-1, p)
		}
		return errorResult("read_file: offset %d is past the end of %s (%d lines)", offset, p, total)
	}
	r := readResult{Path: p, Content: capText(content, t.cfg.MaxOutputChars), TotalLines: total, Truncated: offset-1+limit < total || capped}
	if capped {
		r.Note = fmt.Sprintf("%s is larger than the %d MiB read_file reads; total_lines counts the lines in that part only", p, readMaxScan>>20)
	}
	return jsonResult(r)
}

type readResult struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	TotalLines int    `json:"total_lines"`
	Truncated  bool   `json:"truncated"`
	Note       string `json:"note,omitempty"`
}

// write_file

type writeFileTool struct{ cfg ToolsConfig }

func (writeFileTool) Definition() chat.Tool {
	return definition("write_file",
		"Write a file of the workspace, replacing it if it exists and creating parent directories.",
		`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"File path, relative to the workspace (the current directory) or absolute under /workspace."},`+
			`"content":{"type":"string","description":"The complete new content of the file."}},`+
			`"required":["path","content"]}`)
}

func (t writeFileTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return errorResult("write_file: %v", err)
	}
	p, err := cleanPath(sb, a.Path)
	if err != nil {
		return errorResult("write_file: %v", err)
	}
	if a.Content == nil {
		return errorResult(`write_file: "content" is required`)
	}
	m, cancel, err := t.cfg.begin(ctx, math.MaxInt64, 0)
	if err != nil {
		return errorResult("write_file: %v", err)
	}
	defer cancel()
	defer m.end()
	if err := m.write(int64(len(*a.Content))); err != nil {
		return errorResult("write_file: %v", err)
	}
	if err := sb.WriteFile(p, []byte(*a.Content)); err != nil {
		return errorResult("write_file: %v", err)
	}
	return jsonResult(struct {
		Path         string `json:"path"`
		BytesWritten int    `json:"bytes_written"`
	}{p, len(*a.Content)})
}

// patch

type patchTool struct{ cfg ToolsConfig }

func (patchTool) Definition() chat.Tool {
	return definition("patch",
		"Replace text in a file of the workspace. old_string must occur exactly once unless replace_all is true.",
		`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"File path, relative to the workspace (the current directory) or absolute under /workspace."},`+
			`"old_string":{"type":"string","description":"The exact text to replace."},`+
			`"new_string":{"type":"string","description":"The replacement text."},`+
			`"replace_all":{"type":"boolean","description":"Replace every occurrence (default false)."}},`+
			`"required":["path","old_string","new_string"]}`)
}

func (t patchTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	var a struct {
		Path       string  `json:"path"`
		OldString  string  `json:"old_string"`
		NewString  *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return errorResult("patch: %v", err)
	}
	p, err := cleanPath(sb, a.Path)
	if err != nil {
		return errorResult("patch: %v", err)
	}
	if a.OldString == "" {
		return errorResult(`patch: "old_string" is required and must not be empty`)
	}
	if a.NewString == nil {
		return errorResult(`patch: "new_string" is required`)
	}
	m, cancel, err := t.cfg.begin(ctx, math.MaxInt64, 0)
	if err != nil {
		return errorResult("patch: %v", err)
	}
	defer cancel()
	defer m.end()
	data, err := readCapped(sb.FS(), p, patchMaxFileSize)
	if err == nil {
		err = m.scan(int64(len(data)))
	}
	if err != nil {
		return errorResult("patch: %v", err)
	}
	text := string(data)
	n := strings.Count(text, a.OldString)
	switch {
	case n == 0:
		return errorResult("patch: old_string not found in %s", p)
	case n > 1 && !a.ReplaceAll:
		return errorResult("patch: old_string occurs %d times in %s; make it unique or set replace_all", n, p)
	}
	if grown := int64(len(text)) + int64(n)*int64(len(*a.NewString)-len(a.OldString)); grown > patchMaxFileSize && a.ReplaceAll ||
		!a.ReplaceAll && int64(len(text))+int64(len(*a.NewString)-len(a.OldString)) > patchMaxFileSize {
		return errorResult("patch: the result would be larger than the %d MiB patch edits; use write_file or the terminal", patchMaxFileSize>>20)
	}
	if a.ReplaceAll {
		text = strings.ReplaceAll(text, a.OldString, *a.NewString)
	} else {
		text = strings.Replace(text, a.OldString, *a.NewString, 1)
	}
	if err := m.write(int64(len(text))); err != nil {
		return errorResult("patch: %v", err)
	}
	if err := sb.WriteFile(p, []byte(text)); err != nil {
		return errorResult("patch: %v", err)
	}
	return jsonResult(struct {
		Path         string `json:"path"`
		Replacements int    `json:"replacements"`
	}{p, n})
}

// readCapped reads a regular file of at most max bytes; a larger one is refused
// with an error naming the cap, without reading it.
func readCapped(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, fi, err := openRegular(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := func(size int64) error {
		return fmt.Errorf("%s is %d bytes, over the %d MiB patch edits; use the terminal (sed, python) for large files", name, size, max>>20)
	}
	if fi.Size() > max {
		return nil, tooBig(fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max { // it grew since the stat
		return nil, tooBig(int64(len(data)))
	}
	return data, nil
}

// search_files

type searchFilesTool struct{ cfg ToolsConfig }

const (
	searchMaxMatches  = 50
	searchMaxFileSize = 1 << 20
	searchMaxLineLen  = 200
)

func (searchFilesTool) Definition() chat.Tool {
	return definition("search_files",
		"Search the contents of workspace files for a regular expression (RE2 syntax). Returns matches as \"path:line: text\".",
		`{"type":"object","properties":{`+
			`"pattern":{"type":"string","description":"Regular expression to search for."},`+
			`"path":{"type":"string","description":"Directory to search, relative to the workspace (default \".\")."},`+
			`"glob":{"type":"string","description":"Only search files whose name matches this glob, e.g. \"*.py\" (a glob with \"/\" matches the path)."}},`+
			`"required":["pattern"]}`)
}

func (t searchFilesTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Glob    string `json:"glob"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return errorResult("search_files: %v", err)
	}
	if a.Pattern == "" {
		return errorResult(`search_files: "pattern" is required`)
	}
	lm, err := compileSearch(a.Pattern)
	if err != nil {
		return errorResult("search_files: %v", err)
	}
	if a.Glob != "" {
		if _, err := path.Match(a.Glob, ""); err != nil {
			return errorResult("search_files: invalid glob %q: %v", a.Glob, err)
		}
	}
	root := "."
	if a.Path != "" {
		if root, err = cleanPath(sb, a.Path); err != nil {
			return errorResult("search_files: %v", err)
		}
		if !fs.ValidPath(root) {
			return errorResult("search_files: path %q leaves the workspace", a.Path)
		}
	}
	if s, ok := sb.(Searcher); ok {
		return t.searchSandbox(ctx, s, a.Pattern, root, a.Glob)
	}
	m, cancel, err := t.cfg.begin(ctx, searchMaxScan, searchMaxWork)
	if err != nil {
		return errorResult("search_files: %v", err)
	}
	defer cancel()
	defer m.end()
	fsys := sb.FS()
	var matches []string
	total := 0
	skip := func(name string) bool {
		return strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules"
	}
	var line []byte
	tooLarge := 0
	stopped, err := walkFiles(fsys, root, skip, m, func(p string) error {
		if a.Glob != "" && !globMatch(a.Glob, root, p) {
			return nil
		}
		f, fi, err := openRegular(fsys, p)
		if err != nil {
			return nil // vanished or unreadable: skipped
		}
		defer f.Close()
		if fi.Size() > searchMaxFileSize {
			tooLarge++
			return nil
		}
		lr := newLineReader(f, searchMaxFileSize, searchMaxFileSize)
		lr.m = m
		var found []string
		hits := 0
		var stop error
		for n := 1; ; n++ {
			var ok bool
			line, _, ok, err = lr.next(true, line[:0])
			if err != nil || !ok {
				stop = asCap(err)
				break
			}
			if bytes.IndexByte(line, 0) >= 0 {
				return nil // binary
			}
			show := len(matches)+len(found) < searchMaxMatches
			hit, at, err := lm.match(m, line, show)
			if err != nil {
				stop = err
				break
			}
			if !hit {
				continue
			}
			if show {
				found = append(found, fmt.Sprintf("%s:%d: %s", p, n, excerpt(line, at)))
			}
			hits++
		}
		if lr.capped {
			tooLarge++ // grew past the cap since the stat
			return nil
		}
		matches = append(matches, found...)
		total += hits
		return stop
	})
	var capped *capError
	if err != nil && !errors.As(err, &capped) {
		return errorResult("search_files: %v", err)
	}
	var notes []string
	if tooLarge > 0 {
		notes = append(notes, fmt.Sprintf("%d files larger than the %d MiB search_files reads were not searched; use the terminal (grep) for them",
			tooLarge, searchMaxFileSize>>20))
	}
	if lm.windowed > 0 {
		notes = append(notes, fmt.Sprintf("%d lines longer than %d bytes were matched in windows of that size overlapping by %d bytes: "+
			"a longer match is found only within one window; use the terminal (grep) for those", lm.windowed, searchMatchWindow, searchMatchOverlap))
	}
	if stopped {
		notes = append(notes, fmt.Sprintf("the search stopped at %d entries or %d directories deep; give a narrower path",
			searchMaxEntries, searchMaxDepth))
	}
	note := strings.Join(notes, "; ")
	joined := capText(strings.Join(matches, "\n"), t.cfg.MaxOutputChars)
	r := searchResult{Matches: joined, Total: total, Truncated: total > len(matches) || stopped || capped != nil, Note: note}
	if capped != nil {
		// The search did not finish: what it found so far, and which cap stopped it.
		r.Error = "search_files " + capped.Error()
	}
	return jsonResult(r)
}

type searchResult struct {
	Matches   string `json:"matches"`
	Total     int    `json:"total"`
	Truncated bool   `json:"truncated"`
	Note      string `json:"note,omitempty"`
	Error     string `json:"error,omitempty"`
}

// excerpt is what search_files shows of a matching line: at most searchMaxLineLen
// characters from at (where the match begins in a line matched in windows, else
// 0), each cut marked with "…".
func excerpt(line []byte, at int) string {
	for at > 0 && at < len(line) && !utf8.RuneStart(line[at]) {
		at--
	}
	text := strings.TrimRight(string(line[at:]), "\r")
	if utf8.RuneCountInString(text) > searchMaxLineLen {
		text = string([]rune(text)[:searchMaxLineLen]) + "…"
	}
	if at > 0 {
		text = "…" + text
	}
	return text
}

// asCap returns err when it is a cap or the deadline (the search stops there);
// other read errors only end the file.
func asCap(err error) error {
	var c *capError
	if errors.As(err, &c) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// globMatch reports whether the file at workspace path p, found under the search root,
// matches glob: a glob without "/" (after any leading "**/") is matched against the
// file's name, at any depth; one with "/" against the path relative to the search root
// or to the workspace.
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
