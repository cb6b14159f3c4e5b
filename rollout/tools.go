package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
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
	Def chat.Tool                                                          // the definition offered to the model
	Fn  func(ctx context.Context, sb Sandbox, args json.RawMessage) string // runs a call; returns its result text
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
	// FileToolTimeout bounds the wall time of one call of read_file, write_file,
	// patch or search_files, which run on the host: a call still working then stops
	// and its result names the cap. 0 means 10s.
	FileToolTimeout time.Duration
	// RolloutFileToolTime bounds the wall time those tools spend over one rollout
	// (see [WithToolBudget]); past it they refuse and say so. 0 means 2m.
	RolloutFileToolTime time.Duration
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
	if c.FileToolTimeout <= 0 {
		c.FileToolTimeout = 10 * time.Second
	}
	if c.RolloutFileToolTime <= 0 {
		c.RolloutFileToolTime = 2 * time.Minute
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
		terminalTool{cfg}, readFileTool{cfg}, writeFileTool{cfg}, patchTool{cfg}, searchFilesTool{cfg},
	}
}

// capText cuts s to at most maxChars characters (runes), keeping its head and tail and
// marking the cut in the middle: "\n...[N characters cut]...\n". maxChars ≤ 0 means no
// cap. The marker is not counted in maxChars.
func capText(s string, maxChars int) string {
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
// object with its keys in order: its longest string values are cut (capText) until
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
		return capText(s, maxChars)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return capText(s, maxChars)
		}
		f := field{key: t.(string)}
		if err := dec.Decode(&f.raw); err != nil {
			return capText(s, maxChars)
		}
		var v string
		if len(f.raw) > 0 && f.raw[0] == '"' && json.Unmarshal(f.raw, &v) == nil {
			f.str = &v
		}
		fields = append(fields, f)
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return capText(s, maxChars)
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
			cut = capText(str, keep)
		}
		fields[longest].str = &cut
	}
	return capText(s, maxChars)
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
