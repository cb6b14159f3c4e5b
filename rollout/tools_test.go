package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
)

func toolByName(t *testing.T, tools []rollout.Tool, name string) rollout.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Definition().Function.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func callTool(t *testing.T, tools []rollout.Tool, sb rollout.Sandbox, name, args string) map[string]any {
	t.Helper()
	out := toolByName(t, tools, name).Call(context.Background(), sb, json.RawMessage(args))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), "result %q is not a JSON object", out)
	return m
}

func TestDefaultToolDefinitions(t *testing.T) {
	var names []string
	for _, tl := range rollout.DefaultTools() {
		d := tl.Definition()
		require.Equal(t, "function", d.Type)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(d.Function.Parameters, &schema), d.Function.Name)
		require.Equal(t, "object", schema["type"])
		require.NotEmpty(t, schema["required"])
		names = append(names, d.Function.Name)
	}
	if diff := cmp.Diff([]string{"terminal", "read_file", "write_file", "patch", "search_files"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestTerminalTool(t *testing.T) {
	tools := rollout.NewTools(rollout.ToolsConfig{MaxOutputChars: 40})
	sb := newTempSandbox(t)
	tests := []struct {
		name string
		args string
		want map[string]any
	}{
		{"stdout and stderr in order", `{"command": "echo out; echo err >&2; exit 3"}`,
			map[string]any{"output": "out\nerr", "exit_code": 3.0, "error": ""}},
		{"timeout", `{"command": "sleep 5", "timeout": 1}`,
			map[string]any{"output": "", "exit_code": 124.0, "error": "command timed out after 1s and was killed"}},
		{"long output keeps head and tail", `{"command": "seq 1 100"}`,
			map[string]any{"output": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n...[251 characters cut]...\n4\n95\n96\n97\n98\n99\n100", "exit_code": 0.0, "error": ""}},
		{"missing command", `{}`, map[string]any{"error": `terminal: "command" is required`}},
		{"unknown argument", `{"command": "ls", "cwd": "/"}`,
			map[string]any{"error": `terminal: invalid arguments: json: unknown field "cwd"`}},
		{"bad timeout", `{"command": "ls", "timeout": 0}`,
			map[string]any{"error": `terminal: "timeout" must be at least 1 second`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := callTool(t, tools, sb, "terminal", tc.args)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFileTools(t *testing.T) {
	tools := rollout.DefaultTools()
	sb := newTempSandbox(t)
	steps := []struct {
		name, tool, args string
		want             map[string]any
	}{
		{"write creates directories", "write_file", `{"path": "pkg/sol.py", "content": "def f():\n    return 1\n\nprint(f())\n"}`,
			map[string]any{"path": "pkg/sol.py", "bytes_written": 34.0}},
		{"read numbers lines", "read_file", `{"path": "pkg/sol.py"}`,
			map[string]any{"path": "pkg/sol.py", "content": "     1|def f():\n     2|    return 1\n     3|\n     4|print(f())\n", "total_lines": 4.0, "truncated": false}},
		{"read with offset and limit", "read_file", `{"path": "./pkg/sol.py", "offset": 2, "limit": 2}`,
			map[string]any{"path": "pkg/sol.py", "content": "     2|    return 1\n     3|\n", "total_lines": 4.0, "truncated": true}},
		{"read past the end", "read_file", `{"path": "pkg/sol.py", "offset": 9}`,
			map[string]any{"error": "read_file: offset 9 is past the end of pkg/sol.py (4 lines)"}},
		{"patch replaces a unique string", "patch", `{"path": "pkg/sol.py", "old_string": "return 1", "new_string": "return 2"}`,
			map[string]any{"path": "pkg/sol.py", "replacements": 1.0}},
		{"patch refuses a missing string", "patch", `{"path": "pkg/sol.py", "old_string": "return 1", "new_string": "x"}`,
			map[string]any{"error": "patch: old_string not found in pkg/sol.py"}},
		{"patch refuses an ambiguous string", "patch", `{"path": "pkg/sol.py", "old_string": "f()", "new_string": "g()"}`,
			map[string]any{"error": "patch: old_string occurs 2 times in pkg/sol.py; make it unique or set replace_all"}},
		{"patch replace_all", "patch", `{"path": "pkg/sol.py", "old_string": "f()", "new_string": "g()", "replace_all": true}`,
			map[string]any{"path": "pkg/sol.py", "replacements": 2.0}},
		{"read after patches", "read_file", `{"path": "pkg/sol.py", "limit": 2}`,
			map[string]any{"path": "pkg/sol.py", "content": "     1|def g():\n     2|    return 2\n", "total_lines": 4.0, "truncated": true}},
		{"write needs content", "write_file", `{"path": "a"}`, map[string]any{"error": `write_file: "content" is required`}},
		{"read needs a path", "read_file", `{}`, map[string]any{"error": `read_file: "path" is required`}},
		{"search by regexp and glob", "search_files", `{"pattern": "return \\d", "glob": "*.py"}`,
			map[string]any{"matches": "pkg/sol.py:2:     return 2", "total": 1.0, "truncated": false}},
		{"search with a glob that matches nothing", "search_files", `{"pattern": "return", "glob": "*.txt"}`,
			map[string]any{"matches": "", "total": 0.0, "truncated": false}},
		{"search a sub-directory", "search_files", `{"pattern": "def", "path": "pkg"}`,
			map[string]any{"matches": "pkg/sol.py:1: def g():", "total": 1.0, "truncated": false}},
		{"search with an invalid pattern", "search_files", `{"pattern": "("}`,
			map[string]any{"error": "search_files: invalid pattern: error parsing regexp: missing closing ): `(`"}},
		{"search outside the workspace", "search_files", `{"pattern": "x", "path": "../.."}`,
			map[string]any{"error": `search_files: path "../.." leaves the workspace`}},
		{"search with a ** glob", "search_files", `{"pattern": "def", "glob": "**/*.py"}`,
			map[string]any{"matches": "pkg/sol.py:1: def g():", "total": 1.0, "truncated": false}},
		{"search with a glob on the path", "search_files", `{"pattern": "def", "glob": "pkg/*.py"}`,
			map[string]any{"matches": "pkg/sol.py:1: def g():", "total": 1.0, "truncated": false}},
		{"absolute paths under /workspace name workspace files", "write_file", `{"path": "/workspace/abs/b.py", "content": "B = 1\n"}`,
			map[string]any{"path": "abs/b.py", "bytes_written": 6.0}},
		{"read an absolute path under /workspace", "read_file", `{"path": "/workspace/abs/b.py"}`,
			map[string]any{"path": "abs/b.py", "content": "     1|B = 1\n", "total_lines": 1.0, "truncated": false}},
		{"patch an absolute path under /workspace", "patch", `{"path": "/workspace/abs/b.py", "old_string": "1", "new_string": "2"}`,
			map[string]any{"path": "abs/b.py", "replacements": 1.0}},
		{"write a nested file", "write_file", `{"path": "abs/deep/c.py", "content": "def c(): pass\n"}`,
			map[string]any{"path": "abs/deep/c.py", "bytes_written": 14.0}},
		{"search with a path glob relative to the search path", "search_files", `{"pattern": "def", "path": "abs", "glob": "deep/*.py"}`,
			map[string]any{"matches": "abs/deep/c.py:1: def c(): pass", "total": 1.0, "truncated": false}},
		{"a path glob does not match at other depths", "search_files", `{"pattern": "def", "glob": "deep/*.py"}`,
			map[string]any{"matches": "", "total": 0.0, "truncated": false}},
		{"search /workspace", "search_files", `{"pattern": "B = ", "path": "/workspace"}`,
			map[string]any{"matches": "abs/b.py:1: B = 2", "total": 1.0, "truncated": false}},
		{"search a directory under /workspace", "search_files", `{"pattern": "def", "path": "/workspace/pkg/"}`,
			map[string]any{"matches": "pkg/sol.py:1: def g():", "total": 1.0, "truncated": false}},
		{"absolute paths elsewhere are refused", "write_file", `{"path": "/etc/b.py", "content": "x"}`,
			map[string]any{"error": `write_file: path "/etc/b.py" is outside the workspace /workspace; give a path relative to it`}},
		{"a look-alike prefix is refused", "read_file", `{"path": "/workspacex/b.py"}`,
			map[string]any{"error": `read_file: path "/workspacex/b.py" is outside the workspace /workspace; give a path relative to it`}},
		{"leaving /workspace through .. is refused", "patch", `{"path": "/workspace/../etc/passwd", "old_string": "a", "new_string": "b"}`,
			map[string]any{"error": `patch: path "/etc/passwd" is outside the workspace /workspace; give a path relative to it`}},
		{"searching outside /workspace is refused", "search_files", `{"pattern": "x", "path": "/etc"}`,
			map[string]any{"error": `search_files: path "/etc" is outside the workspace /workspace; give a path relative to it`}},
	}
	for _, st := range steps {
		got := callTool(t, tools, sb, st.tool, st.args)
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, diff)
		}
	}
	t.Run("missing file", func(t *testing.T) {
		got := callTool(t, tools, sb, "read_file", `{"path": "nope.py"}`)
		require.Contains(t, got["error"], "read_file: ")
		require.Contains(t, got["error"], "nope.py")
	})
	t.Run("escape refused", func(t *testing.T) {
		got := callTool(t, tools, sb, "write_file", `{"path": "../outside", "content": "x"}`)
		require.Contains(t, got["error"], "write_file: ")
	})
}

// dirSandbox is a sandbox whose commands see the workspace at its host path, as the
// unconfined sandbox's do.
type dirSandbox struct{ *tempSandbox }

func (s dirSandbox) Dir() string { return s.dir }

func TestFileToolsTakeTheSandboxDir(t *testing.T) {
	tools := rollout.DefaultTools()
	sb := dirSandbox{newTempSandbox(t)}
	got := callTool(t, tools, sb, "write_file", fmt.Sprintf(`{"path": %q, "content": "x"}`, sb.dir+"/sub/a.txt"))
	require.Equal(t, map[string]any{"path": "sub/a.txt", "bytes_written": 1.0}, got)
	got = callTool(t, tools, sb, "read_file", `{"path": "/workspace/sub/a.txt"}`)
	require.Equal(t, "     1|x\n", got["content"], "/workspace still names the workspace")
	got = callTool(t, tools, sb, "read_file", fmt.Sprintf(`{"path": %q}`, sb.dir+"x/a.txt"))
	require.Equal(t, fmt.Sprintf("read_file: path %q is outside the workspace %s; give a path relative to it", sb.dir+"x/a.txt", sb.dir), got["error"])
}

func TestCapText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short", "hello", 10, "hello"},
		{"no cap", "hello", 0, "hello"},
		{"cut", "abcdefghij", 4, "ab\n...[6 characters cut]...\nij"},
		{"runes, not bytes", "ααββγγ", 2, "α\n...[4 characters cut]...\nγ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, rollout.CapText(tc.in, tc.max))
		})
	}
}

func TestFuncTool(t *testing.T) {
	tl := rollout.FuncTool{Fn: func(_ context.Context, _ rollout.Sandbox, args json.RawMessage) string {
		return strings.ToUpper(string(args))
	}}
	require.Equal(t, `{"A":1}`, tl.Call(context.Background(), nil, json.RawMessage(`{"a":1}`)))
}

func FuzzCapText(f *testing.F) {
	f.Add("abcdefghij", 4)
	f.Add("ααββγγ", 2)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 64
		got := rollout.CapText(s, n)
		if !utf8.ValidString(s) {
			return // cut by rune as decoded; only no panic is asked of invalid text
		}
		if n <= 0 || utf8.RuneCountInString(s) <= n {
			if got != s {
				t.Fatalf("CapText(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		r := []rune(s)
		head, tail := string(r[:n/2]), string(r[len(r)-(n-n/2):])
		if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) || !strings.Contains(got, "characters cut]") {
			t.Fatalf("CapText(%q, %d) = %q: want head %q, tail %q and the marker", s, n, got, head, tail)
		}
	})
}

// The test sandbox keeps the contract the tools rely on.
func TestTempSandboxConformance(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox { return newTempSandbox(t) })
}

func TestCapResult(t *testing.T) {
	ctrl := strings.Repeat("\x01", 5000) // JSON-escaped, each is six characters
	tests := []struct {
		name    string
		in      string
		max     int
		want    string // exact result, when set
		wantKey []string
	}{
		{name: "short", in: `{"a":"b"}`, max: 100, want: `{"a":"b"}`},
		{name: "not JSON is cut as text", in: strings.Repeat("x", 100), max: 10,
			want: "xxxxx\n...[90 characters cut]...\nxxxxx"},
		{name: "the longest string is cut, keys in order", max: 200,
			in:      `{"output":"` + strings.Repeat("o", 1000) + `","exit_code":3,"error":"short"}`,
			wantKey: []string{"output", "exit_code", "error"}},
		{name: "escaped control characters", max: 2000,
			in:      jsonResultForTest(map[string]any{"output": ctrl}),
			wantKey: []string{"output"}},
		{name: "two long strings", max: 500,
			in:      `{"b":"` + strings.Repeat("b", 900) + `","a":"` + strings.Repeat(`\"`, 900) + `"}`,
			wantKey: []string{"b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.CapResult(tc.in, tc.max)
			if tc.want != "" {
				require.Equal(t, tc.want, got)
				return
			}
			require.LessOrEqual(t, utf8.RuneCountInString(got), tc.max, got)
			dec := json.NewDecoder(strings.NewReader(got))
			var keys []string
			_, err := dec.Token()
			require.NoError(t, err, got)
			for dec.More() {
				k, err := dec.Token()
				require.NoError(t, err, got)
				keys = append(keys, k.(string))
				var v any
				require.NoError(t, dec.Decode(&v), got)
			}
			require.Equal(t, tc.wantKey, keys)
			require.Contains(t, got, "characters cut]")
		})
	}
	// The numbers and short strings are kept as they were.
	got := rollout.CapResult(`{"output":"`+strings.Repeat("o", 1000)+`","exit_code":3,"error":"short"}`, 200)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(got), &m))
	require.Equal(t, 3.0, m["exit_code"])
	require.Equal(t, "short", m["error"])
	require.True(t, strings.HasPrefix(m["output"].(string), "ooo"))
	require.True(t, strings.HasSuffix(m["output"].(string), "ooo"))
}

func jsonResultForTest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func FuzzCapResult(f *testing.F) {
	f.Add(`{"output":"`+strings.Repeat("\\u0001", 300)+`","exit_code":0}`, 100)
	f.Add(`{"a":[1,2,3],"b":"xyz"}`, 5)
	f.Add(`not json`, 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 4096
		got := rollout.CapResult(s, n)
		if n <= 0 || utf8.RuneCountInString(s) <= n {
			if got != s {
				t.Fatalf("CapResult(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		if utf8.ValidString(s) && utf8.RuneCountInString(got) > n+40 {
			t.Fatalf("CapResult(%q, %d) = %q: %d characters", s, n, got, utf8.RuneCountInString(got))
		}
		if json.Valid([]byte(s)) && json.Valid([]byte(got)) && utf8.RuneCountInString(got) > n {
			t.Fatalf("CapResult(%q, %d) = %q: valid JSON over the cap", s, n, got)
		}
	})
}

// A terminal command printing control characters gives a result whose JSON is far
// longer than its output; the tool message is still a JSON object within the cap.
func TestAgentKeepsLongToolResultsJSON(t *testing.T) {
	p := &fakePolicy{script: scripted(call("terminal", map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' '\\1'; echo; echo THE END"}))}
	a, err := rollout.NewAgent(p, rollout.Config{MaxResultChars: 4000})
	require.NoError(t, err)
	tr, err := a.Run(context.Background(), startMessages, newTempSandbox(t))
	require.NoError(t, err)
	require.Equal(t, rollout.StopNoToolCalls, tr.Stop, tr.Err)
	msg := tr.Messages[3]
	require.LessOrEqual(t, utf8.RuneCountInString(msg.Content), 4000)
	res := toolResult(t, msg)
	require.Equal(t, 0.0, res["exit_code"])
	require.True(t, strings.HasSuffix(res["output"].(string), "THE END"), res["output"])
	require.Contains(t, res["output"], "characters cut]")
}
