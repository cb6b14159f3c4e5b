package rollout_test

import (
	"context"
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

// patternWords is the costliest pattern per instruction-byte measured on a line of
// words (about 50 ns of one loaded core): 903 instructions, within the size cap,
// matching only at a line's end.
const patternWords = `([a-z]+ ?){150}$`

// wordLine is a line of n bytes of words, ending in "xyz".
func wordLine(n int) string {
	return strings.Repeat("abcdefgh ", (n-3)/9) + strings.Repeat("a", (n-3)%9) + "xyz"
}

// searchOne writes content to the file f.txt of a fresh workspace, runs search_files
// with pattern on it (its deadlines an hour), and returns the result and what the call spent: bytes read,
// matching work, and the most bytes one match call was given.
func searchOne(t testing.TB, content, pattern string) (got map[string]any, bytes, work, largest int64) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(content), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	sb := &tempSandbox{dir: dir, root: root, life: context.Background(), stop: func() {}}
	ctx := rollout.WithToolBudget(context.Background())
	// Deadlines that never come first, so that the work budget decides, however
	// slow the host (or the race detector).
	tools := rollout.NewTools(rollout.ToolsConfig{FileToolTimeout: time.Hour, RolloutFileToolTime: time.Hour})
	got = callToolCtx(t, ctx, tools, sb, "search_files", fmt.Sprintf(`{"pattern": %q}`, pattern))
	_, bytes, work = rollout.Spent(ctx)
	return got, bytes, work, rollout.LargestMatch(ctx)
}

// TestSearchFilesLongLine: a line longer than a window is matched in windows, so
// no match call is given more than rollout.SearchMatchWindow bytes: a 131 KB line
// (one match call of 14 s on the code before) is matched within the call's work
// budget, and a 1 MiB line (the longest search_files reads) stops at the budget
// with no call over the window. A file of several MB is not searched at all.
func TestSearchFilesLongLine(t *testing.T) {
	t.Run("131 KB", func(t *testing.T) {
		got, _, work, largest := searchOne(t, wordLine(131072)+"\n", patternWork)
		require.Nil(t, got["error"], "%v", got)
		require.Equal(t, float64(1), got["total"], "the match at the line's end, in its last window")
		require.Contains(t, got["matches"], "f.txt:1: …")
		require.Contains(t, got["note"], "1 lines longer than 4096 bytes were matched in windows")
		require.LessOrEqual(t, largest, int64(rollout.SearchMatchWindow))
		require.LessOrEqual(t, work, int64(rollout.SearchMaxWork))
	})
	t.Run("131 KB, 903 instructions", func(t *testing.T) {
		// 903 instructions over the windows of 131 KB (4/3 of it) are more than
		// the call's budget: the call stops there, having given no match call more
		// than a window.
		got, _, work, largest := searchOne(t, wordLine(131072)+"\n", patternWords)
		require.Contains(t, got["error"], "search_files stopped: matching this pattern (903 instructions)")
		require.LessOrEqual(t, largest, int64(rollout.SearchMatchWindow))
		require.LessOrEqual(t, work, int64(rollout.SearchMaxWork))
	})
	t.Run("1 MiB", func(t *testing.T) {
		got, _, work, largest := searchOne(t, wordLine(1<<20-1)+"\n", patternWork)
		require.Contains(t, got["error"], "search_files stopped: matching this pattern (603 instructions)")
		require.Equal(t, true, got["truncated"])
		require.LessOrEqual(t, largest, int64(rollout.SearchMatchWindow))
		require.LessOrEqual(t, work, int64(rollout.SearchMaxWork))
		require.Greater(t, work, int64(rollout.SearchMaxWork)-603*(rollout.SearchMatchWindow+1), "stopped within one window of the budget")
	})
	t.Run("4 MB", func(t *testing.T) {
		got, bytes, work, _ := searchOne(t, wordLine(4<<20)+"\n", patternWork)
		require.Nil(t, got["error"], "%v", got)
		require.Contains(t, got["note"], "1 files larger than the 1 MiB search_files reads were not searched")
		require.Zero(t, bytes)
		require.Zero(t, work)
	})
}

// TestSearchFilesWindowRule holds search_files to its rule for long lines: a match
// of up to rollout.SearchMatchOverlap bytes is found wherever it lies, across a
// window's edge too; ^, \A, $ and \z match only where the line begins or ends, never
// at a window's edge; a plain literal is searched whole.
func TestSearchFilesWindowRule(t *testing.T) {
	const n = 3 * rollout.SearchMatchWindow
	step := rollout.SearchMatchWindow - rollout.SearchMatchOverlap
	long := func(prefix, mid, suffix string, at int) string {
		fill := n - len(prefix) - len(mid) - len(suffix)
		return prefix + strings.Repeat("a", at) + mid + strings.Repeat("a", fill-at) + suffix + "\n"
	}
	match := "b" + strings.Repeat("x", rollout.SearchMatchOverlap-2) + "c" // as long as the overlap
	for _, at := range []int{0, step - 1, step, rollout.SearchMatchWindow - rollout.SearchMatchOverlap/2,
		rollout.SearchMatchWindow - 1, rollout.SearchMatchWindow, 2*step + 7, n - len(match)} {
		t.Run(fmt.Sprintf("a match as long as the overlap at %d", at), func(t *testing.T) {
			got, _, _, largest := searchOne(t, long("", match, "", at), `bx+c`)
			require.Equal(t, float64(1), got["total"], "%v", got)
			require.LessOrEqual(t, largest, int64(rollout.SearchMatchWindow))
			require.Contains(t, got["matches"], "bxxxx", "the excerpt starts where the match does")
		})
	}
	for _, c := range []struct {
		name, line, pattern string
		want                int
	}{
		{"^ where the line begins", long("needle", "", "", 0), `^ne+dle`, 1},
		{"^ nowhere else", long("b", "needle", "", 5000), `^a*ne+dle`, 0},
		{"^ not at a window's edge", long("b", "", "", 0), `^a{10}`, 0},
		{`\A not at a window's edge`, long("b", "", "", 0), `\Aa{10}`, 0},
		{"(?m)^ not at a window's edge", long("b", "", "", 0), `(?m)^a{10}`, 0},
		{"$ where the line ends", long("", "", "needle", 0), `ne+dle$`, 1},
		{"$ not at a window's edge", long("", "", "y", 0), `a{10}$`, 0},
		{`\z not at a window's edge`, long("", "", "y", 0), `a{10}\z`, 0},
		{"^...$ over a whole long line is a match longer than a window", long("", "", "", 0), `^a+$`, 0},
		{"a literal is searched whole", long("", "needle", "", 5000), `needle`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, _, largest := searchOne(t, c.line, c.pattern)
			require.Nil(t, got["error"], "%v", got)
			require.Equal(t, float64(c.want), got["total"], "%v", got)
			if c.pattern == "needle" {
				require.Equal(t, int64(n), largest, "a literal is one substring search of the line")
			} else {
				require.LessOrEqual(t, largest, int64(rollout.SearchMatchWindow))
			}
		})
	}
}

// BenchmarkSearchFilesLongLine measures one search_files call with a pattern of 603
// and one of 903 instructions over a single line of 131 KB and of 1 MiB: the host
// CPU it costs (user and system time of the process), its matching work and the
// most bytes one match call was given.
func BenchmarkSearchFilesLongLine(b *testing.B) {
	for _, bc := range []struct {
		name    string
		n       int
		pattern string
	}{
		{"131KB/603-instructions", 131072, patternWork},
		{"131KB/903-instructions", 131072, patternWords},
		{"1MiB/603-instructions", 1<<20 - 1, patternWork},
		{"1MiB/903-instructions", 1<<20 - 1, patternWords},
	} {
		b.Run(bc.name, func(b *testing.B) {
			content := wordLine(bc.n) + "\n"
			var cpu time.Duration
			var work, largest int64
			for b.Loop() {
				var before, after syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
				_, _, w, l := searchOne(b, content, bc.pattern)
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
				cpu += time.Duration(after.Utime.Nano() - before.Utime.Nano() + after.Stime.Nano() - before.Stime.Nano())
				work, largest = work+w, max(largest, l)
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(work)/float64(b.N), "instruction-bytes/op")
			b.ReportMetric(float64(largest), "max-match-bytes")
		})
	}
}
