package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/chat"
)

// Tool is one function the agent can call. Its result is a string given to the model as
// the tool message's content; the built-in tools return JSON objects, with an "error"
// key when the call failed. A failure of the call is the model's to read, so Call
// returns no error.
//
// Implementations must be safe for concurrent use (one Tool value serves every rollout;
// the Sandbox is the rollout's own).
type Tool interface {
	// Definition is the tool's JSON-schema definition, sent to the chat template.
	Definition() chat.Tool
	// Call runs the tool with the model's arguments (a JSON object) in sb.
	Call(ctx context.Context, sb Sandbox, args json.RawMessage) string
}

// FuncTool adapts a definition and a function to a [Tool].
type FuncTool struct {
	Def chat.Tool
	Fn  func(ctx context.Context, sb Sandbox, args json.RawMessage) string
}

// Definition returns t.Def.
func (t FuncTool) Definition() chat.Tool { return t.Def }

// Call calls t.Fn.
func (t FuncTool) Call(ctx context.Context, sb Sandbox, args json.RawMessage) string {
	return t.Fn(ctx, sb, args)
}

// ToolsConfig configures the built-in tools. The zero value gives the defaults.
type ToolsConfig struct {
	// MaxOutputChars caps the large field of each result (terminal output, file
	// content, search matches) in characters, keeping head and tail with the cut
	// marked. 0 means 10000.
	MaxOutputChars int
	// TerminalTimeout is the command timeout when the model gives none. 0 means 120s.
	TerminalTimeout time.Duration
	// MaxTerminalTimeout bounds the timeout the model may ask for. 0 means 600s.
	MaxTerminalTimeout time.Duration
}

func (c ToolsConfig) withDefaults() ToolsConfig {
	if c.MaxOutputChars <= 0 {
		c.MaxOutputChars = 10000
	}
	if c.TerminalTimeout <= 0 {
		c.TerminalTimeout = 120 * time.Second
	}
	if c.MaxTerminalTimeout <= 0 {
		c.MaxTerminalTimeout = 600 * time.Second
	}
	return c
}

// DefaultTools returns the built-in tools with default settings: terminal, read_file,
// write_file, patch and search_files.
func DefaultTools() []Tool { return NewTools(ToolsConfig{}) }

// NewTools returns the built-in tools configured by cfg, in the order of
// [DefaultTools].
func NewTools(cfg ToolsConfig) []Tool {
	cfg = cfg.withDefaults()
	return []Tool{
		terminalTool{cfg}, readFileTool{cfg}, writeFileTool{}, patchTool{}, searchFilesTool{cfg},
	}
}

// CapText cuts s to at most maxChars characters (runes), keeping its head and tail and
// marking the cut in the middle: "\n...[N characters cut]...\n". maxChars ≤ 0 means no
// cap. The marker is not counted in maxChars.
func CapText(s string, maxChars int) string {
	if maxChars <= 0 || len(s) <= maxChars {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= maxChars {
		return s
	}
	head := maxChars / 2
	tail := maxChars - head
	hb := byteOffsetOfRune(s, head)
	tb := byteOffsetOfRune(s, n-tail)
	return s[:hb] + fmt.Sprintf("\n...[%d characters cut]...\n", n-maxChars) + s[tb:]
}

// capResult caps a tool result at maxChars characters. A JSON object stays a JSON
// object with its keys in order: its longest string values are cut (CapText) until
// the encoding fits; anything else, or an object that cannot be made to fit, is cut
// as text.
func capResult(s string, maxChars int) string {
	if maxChars <= 0 || utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	type field struct {
		key string
		raw json.RawMessage
		str *string
	}
	var fields []field
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return CapText(s, maxChars)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return CapText(s, maxChars)
		}
		f := field{key: t.(string)}
		if err := dec.Decode(&f.raw); err != nil {
			return CapText(s, maxChars)
		}
		var v string
		if len(f.raw) > 0 && f.raw[0] == '"' && json.Unmarshal(f.raw, &v) == nil {
			f.str = &v
		}
		fields = append(fields, f)
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return CapText(s, maxChars)
	}
	encode := func() string {
		var b bytes.Buffer
		b.WriteByte('{')
		for i, f := range fields {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f.key)
			b.Write(k)
			b.WriteByte(':')
			if f.str != nil {
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				_ = enc.Encode(*f.str)
				b.Truncate(b.Len() - 1) // Encode's newline
			} else {
				b.Write(f.raw)
			}
		}
		b.WriteByte('}')
		return b.String()
	}
	for range 20 {
		out := encode()
		over := utf8.RuneCountInString(out) - maxChars
		if over <= 0 {
			return out
		}
		longest := -1
		for i, f := range fields {
			if f.str != nil && (longest < 0 || len(*f.str) > len(*fields[longest].str)) {
				longest = i
			}
		}
		if longest < 0 {
			break
		}
		str := *fields[longest].str
		n := utf8.RuneCountInString(str)
		if n <= 64 {
			break // nothing worth cutting is left
		}
		// Cut what is over plus room for the marker, in characters of the value:
		// escaping makes each count for about escaped/n characters of the encoding.
		// Where the estimate falls short, the next round cuts again.
		escaped := utf8.RuneCountInString(jsonResult(str)) - 2
		remove := int(float64(over+64)*float64(n)/float64(max(escaped, n))) + 1
		cut := fmt.Sprintf("[%d characters cut]", n)
		if keep := n - remove; keep > 0 {
			cut = CapText(str, keep)
		}
		fields[longest].str = &cut
	}
	return CapText(s, maxChars)
}

func byteOffsetOfRune(s string, r int) int {
	i := 0
	for off := range s {
		if i == r {
			return off
		}
		i++
	}
	return len(s)
}

// jsonResult encodes v without HTML escaping, so code reads naturally to the model.
func jsonResult(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return `{"error":"encoding the result failed"}`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// errorResult is the result of a failed call: {"error": msg}.
func errorResult(format string, args ...any) string {
	return jsonResult(struct {
		Error string `json:"error"`
	}{fmt.Sprintf(format, args...)})
}

// decodeArgs decodes args into v, rejecting unknown fields so the model hears of typos.
func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

func definition(name, desc, params string) chat.Tool {
	return chat.Tool{Type: "function", Function: chat.ToolFunction{
		Name: name, Description: desc, Parameters: json.RawMessage(params),
	}}
}

// workspaceMount is where a sandbox's workspace appears to the commands it runs, and
// so to the model (the bubblewrap sandbox mounts it there and runs commands in it).
// The file tools accept absolute paths under it as well as workspace-relative ones.
const workspaceMount = "/workspace"

// workspaceDir is implemented by sandboxes that say where their commands see the
// workspace (the bubblewrap sandbox's Dir: workspaceMount, or the host path when
// unconfined).
type workspaceDir interface{ Dir() string }

// cleanPath turns a model-given path into a workspace-relative one. The model sees the
// workspace as the current directory of its commands, so an absolute path under
// workspaceMount (or under the sandbox's own Dir) names the same file as the path
// relative to it; any other absolute path is refused. The Sandbox refuses whatever
// still leaves the workspace ("..", symlinks).
func cleanPath(sb Sandbox, p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New(`"path" is required`)
	}
	if !strings.HasPrefix(p, "/") {
		return path.Clean(p), nil
	}
	p = path.Clean(p)
	roots := []string{workspaceMount}
	if d, ok := sb.(workspaceDir); ok {
		if dir := d.Dir(); strings.HasPrefix(dir, "/") && path.Clean(dir) != workspaceMount && dir != "/" {
			roots = append(roots, path.Clean(dir))
		}
	}
	for _, r := range roots {
		if p == r {
			return ".", nil
		}
		if rest, ok := strings.CutPrefix(p, r+"/"); ok {
			return rest, nil
		}
	}
	return "", fmt.Errorf("path %q is outside the workspace %s; give a path relative to it", p, roots[len(roots)-1])
}

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
		Output:   CapText(strings.TrimRight(out, " \t\r\n"), t.cfg.MaxOutputChars),
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

func (t readFileTool) Call(_ context.Context, sb Sandbox, args json.RawMessage) string {
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
	data, err := sb.ReadFile(p)
	if err != nil {
		return errorResult("read_file: %v", err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	total := len(lines)
	if offset > total && total > 0 {
		return errorResult("read_file: offset %d is past the end of %s (%d lines)", offset, p, total)
	}
	var b strings.Builder
	end := min(total, offset-1+limit)
	for i := offset - 1; i < end; i++ {
		fmt.Fprintf(&b, "%6d|%s", i+1, strings.TrimRight(lines[i], "\r\n"))
		b.WriteByte('\n')
	}
	return jsonResult(struct {
		Path       string `json:"path"`
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
		Truncated  bool   `json:"truncated"`
	}{p, CapText(b.String(), t.cfg.MaxOutputChars), total, end < total})
}

// write_file

type writeFileTool struct{}

func (writeFileTool) Definition() chat.Tool {
	return definition("write_file",
		"Write a file of the workspace, replacing it if it exists and creating parent directories.",
		`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"File path, relative to the workspace (the current directory) or absolute under /workspace."},`+
			`"content":{"type":"string","description":"The complete new content of the file."}},`+
			`"required":["path","content"]}`)
}

func (writeFileTool) Call(_ context.Context, sb Sandbox, args json.RawMessage) string {
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
	if err := sb.WriteFile(p, []byte(*a.Content)); err != nil {
		return errorResult("write_file: %v", err)
	}
	return jsonResult(struct {
		Path         string `json:"path"`
		BytesWritten int    `json:"bytes_written"`
	}{p, len(*a.Content)})
}

// patch

type patchTool struct{}

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

func (patchTool) Call(_ context.Context, sb Sandbox, args json.RawMessage) string {
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
	data, err := sb.ReadFile(p)
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
	if a.ReplaceAll {
		text = strings.ReplaceAll(text, a.OldString, *a.NewString)
	} else {
		text = strings.Replace(text, a.OldString, *a.NewString, 1)
	}
	if err := sb.WriteFile(p, []byte(text)); err != nil {
		return errorResult("patch: %v", err)
	}
	return jsonResult(struct {
		Path         string `json:"path"`
		Replacements int    `json:"replacements"`
	}{p, n})
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
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return errorResult("search_files: invalid pattern: %v", err)
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
	fsys := sb.FS()
	var matches []string
	total := 0
	err = fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__" || d.Name() == "node_modules") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if a.Glob != "" && !globMatch(a.Glob, root, p) {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > searchMaxFileSize {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			total++
			if len(matches) < searchMaxMatches {
				line = strings.TrimRight(line, "\r")
				if utf8.RuneCountInString(line) > searchMaxLineLen {
					line = string([]rune(line)[:searchMaxLineLen]) + "…"
				}
				matches = append(matches, fmt.Sprintf("%s:%d: %s", p, i+1, line))
			}
		}
		return nil
	})
	if err != nil {
		return errorResult("search_files: %v", err)
	}
	joined := CapText(strings.Join(matches, "\n"), t.cfg.MaxOutputChars)
	return jsonResult(struct {
		Matches   string `json:"matches"`
		Total     int    `json:"total"`
		Truncated bool   `json:"truncated"`
	}{joined, total, total > len(matches)})
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
