package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// The crafted-pattern workspace: 4 files of 1 MB (each at the 1 MiB search_files
// reads) of 4,000-character lines of words, 4 MB in all.
func craftedWorkspace(t testing.TB, dir string) {
	t.Helper()
	line := strings.Repeat("abcdefgh ", 444) + "xyz\n" // 4,000 bytes
	content := strings.Repeat(line, (1<<20)/len(line))
	for i := range 4 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("words%d.txt", i)), []byte(content), 0o644))
	}
}

// Patterns a policy can send: each makes Go's regexp do work proportional to its
// program's size on every byte of every line of craftedWorkspace (on the code
// before the budget, patternLarge took 31.8 s of host CPU and 104 s of wall time
// over those 4 MB).
const (
	patternLarge = `[\s\S]{1000}x`  // 1,003 instructions
	patternWork  = `(\w+\s*){100}$` // 603 instructions, within the size cap; matches only at a line's end
)

func callToolCtx(tb testing.TB, ctx context.Context, tools []rollout.Tool, sb rollout.Sandbox, name, args string) map[string]any {
	tb.Helper()
	for _, tl := range tools {
		if tl.Definition().Function.Name == name {
			out := tl.Call(ctx, sb, json.RawMessage(args))
			var m map[string]any
			require.NoError(tb, json.Unmarshal([]byte(out), &m), "result %q is not a JSON object", out)
			return m
		}
	}
	tb.Fatalf("no tool %s", name)
	return nil
}

// TestSearchFilesIsBoundedInWork sends search_files the patterns of a hostile policy
// over 4 MB: a pattern too large to run is refused before any file is read, one
// within the size cap stops at the work budget (counted in instruction-bytes, never
// in wall time), and each refusal names its cap. A literal over the same files is
// searched whole.
func TestSearchFilesIsBoundedInWork(t *testing.T) {
	sb := newTempSandbox(t)
	craftedWorkspace(t, sb.dir)
	tools := rollout.DefaultTools()
	for _, c := range []struct {
		name, args string
		check      func(t *testing.T, got map[string]any, bytes, work int64)
	}{
		{"a pattern of 1,003 instructions is refused unrun", fmt.Sprintf(`{"pattern": %q}`, patternLarge),
			func(t *testing.T, got map[string]any, bytes, work int64) {
				require.Contains(t, got["error"], "compiles to 1003 instructions, over the 1000 search_files runs")
				require.Zero(t, bytes, "no file was read")
			}},
		{"a few bytes that expand to thousands of instructions are refused uncompiled", fmt.Sprintf(`{"pattern": %q}`, strings.Repeat("[a-h]{999}", 9)),
			func(t *testing.T, got map[string]any, bytes, work int64) {
				require.Contains(t, got["error"], "compiles to more than 1000 instructions")
			}},
		{"a pattern of 5,000 bytes is refused", fmt.Sprintf(`{"pattern": %q}`, strings.Repeat("a", 5000)),
			func(t *testing.T, got map[string]any, bytes, work int64) {
				require.Contains(t, got["error"], "the pattern is 5000 bytes, over the 4096 search_files compiles")
			}},
		{"a pattern of 603 instructions stops at the work budget", fmt.Sprintf(`{"pattern": %q}`, patternWork),
			func(t *testing.T, got map[string]any, bytes, work int64) {
				require.Contains(t, got["error"], "search_files stopped: matching this pattern (603 instructions)")
				require.Contains(t, got["error"], fmt.Sprintf("(%d instruction-bytes", rollout.SearchMaxWork))
				require.Equal(t, true, got["truncated"])
				require.LessOrEqual(t, work, int64(rollout.SearchMaxWork), "matching work")
				require.Greater(t, work, int64(rollout.SearchMaxWork)-603*4001, "stopped within one line of the budget")
				require.Less(t, bytes, int64(4<<20), "stopped before reading all 4 MB")
			}},
		{"a literal reads all 4 MB", `{"pattern": "abcdefgh abc"}`,
			func(t *testing.T, got map[string]any, bytes, work int64) {
				require.Nil(t, got["error"], "%v", got)
				require.Equal(t, float64(4*((1<<20)/4000)), got["total"])
				require.Equal(t, int64(4*((1<<20)/4000)*4000), bytes)
				require.Equal(t, bytes, work, "a literal costs one step a byte")
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rollout.WithToolBudget(context.Background())
			got := callToolCtx(t, ctx, tools, sb, "search_files", c.args)
			_, bytes, work := rollout.Spent(ctx)
			t.Logf("read %d bytes, %d instruction-bytes of matching: %v", bytes, work, got["error"])
			c.check(t, got, bytes, work)
		})
	}
}

// TestFileToolsStopAtTheirDeadline gives the file tools a deadline that has passed
// when they start (so no wall-clock margin decides the outcome): each call that has
// work to do stops and names the deadline; one made after the rollout's time is
// spent is refused and says so.
func TestFileToolsStopAtTheirDeadline(t *testing.T) {
	sb := newTempSandbox(t)
	craftedWorkspace(t, sb.dir)
	perCall := rollout.NewTools(rollout.ToolsConfig{FileToolTimeout: time.Nanosecond})
	perRollout := rollout.NewTools(rollout.ToolsConfig{RolloutFileToolTime: time.Nanosecond})
	const callCap = "stopped after 1ns, the time one call of a file tool may take"
	const rolloutEnd = "stopped at the end of the 1ns of host time this rollout's file tools may use"
	const rolloutSpent = "this rollout's file tools have used their 1ns of host time; use the terminal"
	ctx := rollout.WithToolBudget(context.Background())
	for _, c := range []struct {
		name       string
		ctx        context.Context
		tools      []rollout.Tool
		tool, args string
		want       string
	}{
		{"read_file past 256 KiB", context.Background(), perCall, "read_file", `{"path": "words0.txt", "offset": 200, "limit": 1}`, "read_file: " + callCap},
		{"search_files over 4 MB", context.Background(), perCall, "search_files", `{"pattern": "abcdefgh abc"}`, "search_files " + callCap},
		{"write_file", context.Background(), perCall, "write_file", `{"path": "new.txt", "content": "x"}`, "write_file: " + callCap},
		{"patch", context.Background(), perCall, "patch", `{"path": "words0.txt", "old_string": "xyz", "new_string": "zyx", "replace_all": true}`, "patch: " + callCap},
		{"the rollout's first search", ctx, perRollout, "search_files", `{"pattern": "abcdefgh abc"}`, "search_files " + rolloutEnd},
		{"the rollout's next call", ctx, perRollout, "read_file", `{"path": "words0.txt", "limit": 1}`, "read_file: " + rolloutSpent},
		{"the rollout's next search", ctx, perRollout, "search_files", `{"pattern": "x"}`, "search_files: " + rolloutSpent},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := callToolCtx(t, c.ctx, c.tools, sb, c.tool, c.args)
			require.Equal(t, c.want, got["error"], "%v", got)
		})
	}
	_, err := os.Stat(filepath.Join(sb.dir, "new.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "write_file wrote after its deadline")
	data, err := os.ReadFile(filepath.Join(sb.dir, "words0.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(data), "zyx", "patch wrote after its deadline")
}

// TestFileToolsCountAgainstTheRollout: every file tool's bytes count in the
// rollout's account (read_file what it read, write_file what it wrote, patch both).
func TestFileToolsCountAgainstTheRollout(t *testing.T) {
	sb := newTempSandbox(t)
	require.NoError(t, sb.WriteFile("a.txt", []byte("one\ntwo\n")))
	tools := rollout.DefaultTools()
	ctx := rollout.WithToolBudget(context.Background())
	for _, c := range []struct {
		name, tool, args string
		bytes            int64
	}{
		{"read_file", "read_file", `{"path": "a.txt"}`, 8},
		{"write_file", "write_file", `{"path": "b.txt", "content": "hello"}`, 8 + 5},
		{"patch", "patch", `{"path": "b.txt", "old_string": "hello", "new_string": "bye"}`, 13 + 5 + 3},
		{"search_files", "search_files", `{"pattern": "o"}`, 21 + 8 + 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := callToolCtx(t, ctx, tools, sb, c.tool, c.args)
			require.Nil(t, got["error"], "%v", got)
			elapsed, bytes, _ := rollout.Spent(ctx)
			require.Equal(t, c.bytes, bytes)
			require.Positive(t, elapsed)
		})
	}
}

// BenchmarkSearchFilesCraftedPattern measures one search_files call over the 4 MB of
// craftedWorkspace: the host CPU it costs (user and system time of the process),
// the bytes it read and its matching work.
func BenchmarkSearchFilesCraftedPattern(b *testing.B) {
	dir := b.TempDir()
	craftedWorkspace(b, dir)
	root, err := os.OpenRoot(dir)
	require.NoError(b, err)
	defer root.Close()
	sb := &tempSandbox{dir: dir, root: root, life: context.Background(), stop: func() {}}
	tools := rollout.DefaultTools()
	for _, bc := range []struct{ name, pattern string }{
		{"literal", "abcdefgh abc"},
		{"603-instructions", patternWork},
		{"1003-instructions", patternLarge},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var cpu time.Duration
			var bytes, work int64
			for b.Loop() {
				ctx := rollout.WithToolBudget(context.Background())
				var before, after syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
				callToolCtx(b, ctx, tools, sb, "search_files", fmt.Sprintf(`{"pattern": %q}`, bc.pattern))
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
				cpu += time.Duration(after.Utime.Nano() - before.Utime.Nano() + after.Stime.Nano() - before.Stime.Nano())
				_, n, w := rollout.Spent(ctx)
				bytes, work = bytes+n, work+w
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes-read/op")
			b.ReportMetric(float64(work)/float64(b.N), "instruction-bytes/op")
		})
	}
}

// TestAgentCountsFileToolsPerRollout: Agent.Run gives each rollout an account of its
// own. With a rollout's file-tool time of 1ns, the first read_file of a rollout is
// done (a small file is read before any deadline check) and spends it; the next call
// is refused; the next rollout starts afresh.
func TestAgentCountsFileToolsPerRollout(t *testing.T) {
	read := call("read_file", map[string]any{"path": "a.txt"})
	turns := []string{read, read, "Done."}
	p := &fakePolicy{script: func(turn int, _ string) (string, string) { return turns[turn%3], rollout.FinishStop }}
	a, err := rollout.NewAgent(p, rollout.Config{Tools: rollout.NewTools(rollout.ToolsConfig{RolloutFileToolTime: time.Nanosecond})})
	require.NoError(t, err)
	sb := newTempSandbox(t)
	require.NoError(t, sb.WriteFile("a.txt", []byte("one\n")))
	for rollout_ := range 2 {
		tr, err := a.Run(context.Background(), startMessages, sb)
		require.NoError(t, err)
		require.Equal(t, "system,user,assistant,tool,assistant,tool,assistant", roles(tr.Messages), "rollout %d", rollout_)
		require.Equal(t, "     1|one\n", toolResult(t, tr.Messages[3])["content"], "rollout %d: the first call is done", rollout_)
		require.Equal(t, "read_file: this rollout's file tools have used their 1ns of host time; use the terminal",
			toolResult(t, tr.Messages[5])["error"], "rollout %d: the second is refused", rollout_)
	}
}

// TestFileToolsRefuseWhenTheRolloutIsSpent fills a rollout's account to just under
// its caps (as earlier calls would) and checks that the next calls stop at them, then
// refuse, each naming the rollout's cap; matching work spent does not stop the tools
// that do no matching.
func TestFileToolsRefuseWhenTheRolloutIsSpent(t *testing.T) {
	sb := newTempSandbox(t)
	require.NoError(t, sb.WriteFile("a.txt", []byte(strings.Repeat("0123456789\n", 10))))
	tools := rollout.DefaultTools()
	bytesCap := fmt.Sprintf("the %d MiB this rollout's file tools may read and write", rollout.RolloutMaxFileBytes>>20)
	workCap := fmt.Sprintf("this rollout's searches have done %d instruction-bytes of matching", int64(rollout.RolloutMaxMatchWork))
	for _, c := range []struct {
		name        string
		bytes, work int64 // spent before the call
		tool, args  string
		want        string
	}{
		{"read_file with 10 bytes left", rollout.RolloutMaxFileBytes - 10, 0, "read_file", `{"path": "a.txt"}`,
			"read_file: stopped at the end of " + bytesCap + "; use the terminal"},
		{"read_file with nothing left", rollout.RolloutMaxFileBytes, 0, "read_file", `{"path": "a.txt"}`,
			"read_file: this rollout's file tools have read and written 1024 MiB, the most one rollout may; use the terminal"},
		{"write_file over what is left", rollout.RolloutMaxFileBytes - 3, 0, "write_file", `{"path": "b.txt", "content": "hello"}`,
			"write_file: writing 5 bytes would pass " + bytesCap + "; use the terminal"},
		{"search_files with 100 instruction-bytes left", 0, rollout.RolloutMaxMatchWork - 100, "search_files", `{"pattern": "5"}`,
			"search_files stopped: " + workCap + " (each line's length times the pattern's instructions), the most one rollout may; use the terminal (grep)"},
		{"search_files with none left", 0, rollout.RolloutMaxMatchWork, "search_files", `{"pattern": "5"}`,
			"search_files: " + workCap + ", the most one rollout may; use the terminal (grep)"},
		{"read_file with no matching left", 0, rollout.RolloutMaxMatchWork, "read_file", `{"path": "a.txt", "limit": 1}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rollout.WithToolBudget(context.Background())
			rollout.Spend(ctx, c.bytes, c.work)
			got := callToolCtx(t, ctx, tools, sb, c.tool, c.args)
			if c.want == "" {
				require.Nil(t, got["error"], "%v", got)
				return
			}
			require.Equal(t, c.want, got["error"], "%v", got)
		})
	}
	_, err := os.Stat(filepath.Join(sb.dir, "b.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "write_file wrote past the rollout's cap")
}
