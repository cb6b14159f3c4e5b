package rollout_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// bigFile writes a 1 GiB file without using 1 GiB of disk: 1 MiB of short lines, a
// sparse middle (a single line of NUL bytes almost 1 GiB long), 1 MiB of lines.
func bigFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	var lines bytes.Buffer
	for i := 0; lines.Len() < 1<<20; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	_, err = f.Write(lines.Bytes())
	require.NoError(t, err)
	_, err = f.WriteAt(lines.Bytes(), (1<<30)-int64(lines.Len()))
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), fi.Size())
}

// allocated runs fn and returns the bytes the Go heap allocated meanwhile. The test
// is not parallel, so nothing else of this package runs at the same time.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFileToolsAreBoundedOnHugeFiles gives each file tool a 1 GiB file and a 64 MiB
// file of newlines: every call allocates at most 8 MiB in all (TotalAlloc, which
// only grows, so the peak cannot be higher), and a refusal names its cap.
func TestFileToolsAreBoundedOnHugeFiles(t *testing.T) {
	sb := newTempSandbox(t)
	bigFile(t, filepath.Join(sb.dir, "big.txt"))
	require.NoError(t, os.WriteFile(filepath.Join(sb.dir, "newlines.txt"), bytes.Repeat([]byte{'\n'}, 64<<20), 0o644))
	tools := rollout.DefaultTools()
	const budget = 8 << 20

	cases := []struct {
		name, tool, args string
		check            func(t *testing.T, got map[string]any)
	}{
		{"read the first line of 1 GiB", "read_file", `{"path": "big.txt", "limit": 1}`, func(t *testing.T, got map[string]any) {
			require.Equal(t, "     1|line 0\n", got["content"])
			require.Equal(t, true, got["truncated"])
			require.Contains(t, got["note"], "64 MiB")
		}},
		{"offset 0 is refused", "read_file", `{"path": "big.txt", "offset": 0, "limit": 1}`, func(t *testing.T, got map[string]any) {
			require.Contains(t, got["error"], `"offset" must be at least 1`)
		}},
		{"read past the scan cap", "read_file", `{"path": "big.txt", "offset": 30000000, "limit": 1}`, func(t *testing.T, got map[string]any) {
			require.Contains(t, got["error"], "64 MiB")
			require.Contains(t, got["error"], "sed -n")
		}},
		{"read the line after 1 MiB of lines", "read_file", fmt.Sprintf(`{"path": "big.txt", "offset": %d, "limit": 1}`, linesIn1MiB()+1), func(t *testing.T, got map[string]any) {
			content := got["content"].(string)
			require.Contains(t, content, "bytes of this line cut]")
			require.Less(t, len(content), 16<<10)
		}},
		{"read one line of 64 MiB of newlines", "read_file", `{"path": "newlines.txt", "limit": 1}`, func(t *testing.T, got map[string]any) {
			require.Equal(t, "     1|\n", got["content"])
			require.Equal(t, float64(64<<20), got["total_lines"])
		}},
		{"patch refuses 1 GiB", "patch", `{"path": "big.txt", "old_string": "line 0", "new_string": "x"}`, func(t *testing.T, got map[string]any) {
			require.Contains(t, got["error"], "over the 1 MiB patch edits")
		}},
		{"search skips 1 GiB and says so", "search_files", `{"pattern": "line 0"}`, func(t *testing.T, got map[string]any) {
			require.Equal(t, float64(0), got["total"])
			require.Equal(t, "2 files larger than the 1 MiB search_files reads were not searched; use the terminal (grep) for them", got["note"])
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got map[string]any
			n := allocated(func() { got = callTool(t, tools, sb, c.tool, c.args) })
			c.check(t, got)
			t.Logf("%s: %.2f MiB allocated", c.tool, float64(n)/(1<<20))
			require.LessOrEqual(t, n, uint64(budget), "host memory of one %s call", c.tool)
		})
	}
}

// linesIn1MiB is how many lines bigFile writes at each end.
func linesIn1MiB() int {
	n, size := 0, 0
	for ; size < 1<<20; n++ {
		size += len(fmt.Sprintf("line %d\n", n))
	}
	return n
}

func TestPatchRefusesAResultOverItsCap(t *testing.T) {
	sb := newTempSandbox(t)
	require.NoError(t, sb.WriteFile("a.txt", []byte(strings.Repeat("x\n", 1000))))
	got := callTool(t, rollout.DefaultTools(), sb, "patch",
		fmt.Sprintf(`{"path": "a.txt", "old_string": "x", "new_string": %q, "replace_all": true}`, strings.Repeat("y", 2000)))
	require.Contains(t, got["error"], "larger than the 1 MiB patch edits")
	data, err := sb.ReadFile("a.txt")
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("x\n", 1000), string(data), "the file is unchanged")
}

func TestReadFileCountsLines(t *testing.T) {
	sb := newTempSandbox(t)
	tools := rollout.DefaultTools()
	for _, c := range []struct {
		name, content, args string
		total               float64
		content0            string
		truncated           bool
	}{
		{"no final newline, counted after the window", "a\nb\nc", `{"path": "f", "limit": 1}`, 3, "     1|a\n", true},
		{"no final newline, read to the end", "a\nb\nc", `{"path": "f"}`, 3, "     1|a\n     2|b\n     3|c\n", false},
		{"final newline", "a\nb\n", `{"path": "f", "limit": 1}`, 2, "     1|a\n", true},
		{"window at the end", "a\nb\n", `{"path": "f", "offset": 2, "limit": 1}`, 2, "     2|b\n", false},
		{"empty lines", "\n\n\n", `{"path": "f", "offset": 2, "limit": 1}`, 3, "     2|\n", true},
		{"CRLF", "a\r\nb\r\n", `{"path": "f"}`, 2, "     1|a\n     2|b\n", false},
		{"empty file", "", `{"path": "f"}`, 0, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, sb.WriteFile("f", []byte(c.content)))
			got := callTool(t, tools, sb, "read_file", c.args)
			require.Equal(t, c.total, got["total_lines"], "%v", got)
			require.Equal(t, c.content0, got["content"])
			require.Equal(t, c.truncated, got["truncated"])
		})
	}
}

// FuzzReadLines checks the streaming reader against the obvious whole-file one.
func FuzzReadLines(f *testing.F) {
	for _, seed := range []string{"", "a", "a\n", "a\nb", "\n\n", "a\r\nb\r\n", strings.Repeat("x", 5000) + "\ny"} {
		f.Add(seed, 1, 2)
	}
	f.Fuzz(func(t *testing.T, content string, offset, limit int) {
		if offset < 1 || limit < 1 || offset > 1<<20 || limit > 1<<20 {
			return
		}
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		var want strings.Builder
		for i := offset - 1; i < min(len(lines), offset-1+limit); i++ {
			line := strings.TrimSuffix(lines[i], "\n")
			if len(line) > 4096 {
				continue // cut lines are checked below
			}
			fmt.Fprintf(&want, "%6d|%s\n", i+1, strings.TrimRight(strings.ToValidUTF8(line, "\uFFFD"), "\r"))
		}
		got, total, capped, err := rollout.ReadLines(strings.NewReader(content), offset, limit)
		require.NoError(t, err)
		require.False(t, capped)
		require.Equal(t, len(lines), total)
		if !strings.Contains(got, "bytes of this line cut]") {
			require.Equal(t, want.String(), got)
		}
	})
}
