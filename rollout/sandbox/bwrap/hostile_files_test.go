package bwrap_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// The cases of the hostile suite (TestHostile) aimed at the host side of the file
// tools and at what the code can learn of the host.

// callTool calls a built-in tool and decodes its JSON result.
func callTool(t *testing.T, sb rollout.Sandbox, name, args string) map[string]any {
	t.Helper()
	var m map[string]any
	out := toolNamed(t, rollout.DefaultTools(), name).Call(t.Context(), sb, json.RawMessage(args))
	require.NoError(t, json.Unmarshal([]byte(out), &m), "result %q", out)
	return m
}

// toolNamed is the tool of tools called name.
func toolNamed(t *testing.T, tools []rollout.Tool, name string) rollout.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Definition().Function.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func hostileReadFile1GiB(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	// A sparse 1 GiB file (the quota counts blocks on a tmpfs, sizes when walked):
	// lines at both ends, NUL bytes between.
	fh, err := os.Create(filepath.Join(sb.HostDir(), "big.txt"))
	require.NoError(t, err)
	_, err = fh.WriteString("first line\nsecond line\n")
	require.NoError(t, err)
	_, err = fh.WriteAt([]byte("\nlast line\n"), (1<<30)-11)
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	for _, c := range []struct{ tool, args, want string }{
		{"read_file", `{"path": "big.txt", "limit": 1}`, "first line"},
		{"read_file", `{"path": "big.txt", "offset": 3, "limit": 1}`, "bytes of this line cut"},
		{"patch", `{"path": "big.txt", "old_string": "first", "new_string": "x"}`, "over the 1 MiB patch edits"},
		{"search_files", `{"pattern": "last line"}`, `"total":0`},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got := callTool(t, sb, c.tool, c.args)
		runtime.ReadMemStats(&after)
		b, _ := json.Marshal(got)
		require.Contains(t, string(b), c.want, "%s %s", c.tool, c.args)
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s %s: %.2f MiB allocated", c.tool, c.args, float64(n)/(1<<20))
		require.LessOrEqual(t, n, uint64(8<<20), "host memory of one %s call on a 1 GiB file", c.tool)
	}
	stillWorks(t, f, sb)
}

func hostileSymlinks(t *testing.T, f hostileTarget, secret string) {
	sb := f.sandbox(t)
	res := hostileRun(t, sb, fmt.Sprintf("ln -s /etc/passwd evil && ln -s %s abs && ln -s .. up && ln -s / root && mkfifo fifo", secret), 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path": "evil"}`},
		{"read_file", `{"path": "abs"}`},
		{"read_file", `{"path": "up/x"}`},
		{"read_file", `{"path": "root/etc/hosts"}`},
		{"read_file", `{"path": "fifo"}`},
		{"write_file", `{"path": "evil", "content": "pwned"}`},
		{"write_file", `{"path": "abs", "content": "pwned"}`},
		{"write_file", `{"path": "up/pwned", "content": "pwned"}`},
		{"patch", `{"path": "abs", "old_string": "host", "new_string": "pwned"}`},
		{"patch", `{"path": "root/etc/hosts", "old_string": "localhost", "new_string": "pwned"}`},
		{"search_files", `{"pattern": "root|secret", "path": "root/etc"}`},
	} {
		got := callTool(t, sb, c.tool, c.args)
		require.NotEmpty(t, got["error"], "%s %s: %v", c.tool, c.args, got)
	}
	got := callTool(t, sb, "search_files", `{"pattern": "root:|host secret"}`)
	require.Equal(t, float64(0), got["total"], "search followed a link out: %v", got)
	stillWorks(t, f, sb)
}

func hostileNoHostInfo(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	sbDir := filepath.Dir(sb.HostDir())
	require.NoError(t, sb.WriteFile("look.py", []byte(`
import glob, os, sys
out = []
for p in glob.glob("/proc/[0-9]*"):
    for name in ("cmdline", "environ"):
        try: out.append(open(p + "/" + name, "rb").read().decode(errors="replace"))
        except OSError: pass
    try:
        for fd in os.listdir(p + "/fd"):
            try: out.append(os.readlink(p + "/fd/" + fd))
            except OSError: pass
    except OSError: pass
for name in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/cgroup"):
    out.append(open(name).read())
out.append(repr(dict(os.environ)))
sys.stdout.write("\n".join(out))
`)))
	res := hostileRun(t, sb, "python3 look.py", 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.True(t, res.StdoutBytes < int64(bwrap.DefaultOutputLimit), "the output was cut")
	out := string(res.Stdout)
	require.Contains(t, out, sb.Dir())
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " "+sb.Dir()+" ") {
			t.Logf("the workspace in /proc/self/mountinfo: %s", line)
		}
	}
	// Host paths only: the host uid the code runs as shows in the options of every
	// tmpfs bubblewrap mounts (the kernel prints a tmpfs's owner as the initial
	// user namespace sees it), which the package documentation says.
	hidden := append([]string{sb.HostDir(), sbDir, filepath.Base(sbDir)}, f.Enforcement().CgroupDirs...)
	if f.imageDir != "" {
		hidden = append(hidden, f.imageDir, filepath.Dir(f.imageDir))
	}
	for _, host := range hidden {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, host) {
				t.Errorf("the host path %s is visible inside: %q", host, line)
			}
		}
	}
	stillWorks(t, f, sb)
}

func hostileSearchPattern(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	// 4 MB of 4,000-character lines, written by the agent's own code; then the
	// patterns that made the host match for minutes.
	res := hostileRun(t, sb, `python3 -c "
line = 'abcdefgh ' * 444 + 'xyz\\n'
for i in range(4):
    open('words%d.txt' % i, 'w').write(line * 262)
"`, 20*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	ctx := rollout.WithToolBudget(t.Context())
	for _, c := range []struct{ name, pattern, want string }{
		{"too large to run", `[\s\S]{1000}x`, "search_files: the pattern compiles to 1003 instructions, over the 1000 search_files runs"},
		{"expands when compiled", strings.Repeat(`[a-h]{999}`, 9), "search_files: the pattern compiles to more than 1000 instructions"},
		{"within the size cap, over the work budget", `(\w+\s*){100}$`, "search_files stopped: matching this pattern (603 instructions)"},
	} {
		out := toolNamed(t, rollout.DefaultTools(), "search_files").Call(ctx, sb, json.RawMessage(fmt.Sprintf(`{"pattern": %q}`, c.pattern)))
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &got), "result %q", out)
		require.Contains(t, got["error"], c.want, "%s: %v", c.name, got)
	}
	got := callTool(t, sb, "search_files", `{"pattern": "abcdefgh abc", "glob": "words0.txt"}`)
	require.Equal(t, float64(262), got["total"], "a literal is searched whole: %v", got)
	stillWorks(t, f, sb)
}

func hostileFileToolDeadlines(t *testing.T, f hostileTarget) {
	sb := f.sandbox(t)
	res := hostileRun(t, sb, "head -c 8000000 /dev/zero | tr '\\0' '\\n' > newlines.txt && "+
		"for i in 1 2 3; do head -c 900000 /dev/zero | tr '\\0' '\\n' > small$i.txt; done", 10*time.Second)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	// A deadline that has passed when the call starts: the outcome does not depend on
	// how fast the host is.
	tools := rollout.NewTools(rollout.ToolsConfig{FileToolTimeout: time.Nanosecond})
	for _, tool := range tools {
		var args string
		switch tool.Definition().Function.Name {
		case "read_file":
			args = `{"path": "newlines.txt", "offset": 7000000, "limit": 1}`
		case "search_files":
			args = `{"pattern": "x"}`
		default:
			continue
		}
		var got map[string]any
		out := tool.Call(t.Context(), sb, json.RawMessage(args))
		require.NoError(t, json.Unmarshal([]byte(out), &got), "result %q", out)
		require.Contains(t, got["error"], "stopped after 1ns, the time one call of a file tool may take", out)
	}
	stillWorks(t, f, sb)
}
