package bwrap

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

// TestOnlyBwrapStartsBeforeTheCommand: as root the library starts bwrap itself, with
// no wrapper before it, in a pid namespace of its own; on cgroup v1, bwrap and
// everything it starts are in the command's cgroup, which the library moved it into
// while it waited for its options.
func TestOnlyBwrapStartsBeforeTheCommand(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("without root, bwrap starts under unshare(1)")
	}
	f, err := New(t.Context(), Config{})
	require.NoError(t, err)
	require.True(t, f.ownNS)
	sb, err := f.create(t.Context(), nil)
	require.NoError(t, err)
	defer sb.Close()

	spec, _, err := sb.prepare(t.Context(), rollout.Command{Shell: "true"})
	require.NoError(t, err)
	want := append(append([]string{f.cfg.BwrapPath, "--args", "4", "--"}, f.prlimitArgs(DefaultTimeout)...), "/bin/sh", "-c", "true")
	require.Equal(t, want, spec.cmd.Args)
	require.NotNil(t, spec.gate)
	spec.discard()
	sb.active.Done()

	if f.cg == nil || f.cg.mode != CgroupV1 {
		t.Skipf("no cgroup v1 here (%s)", f.enforcement.CgroupMissing)
	}
	p, err := sb.Start(t.Context(), rollout.Command{Shell: "echo ready; exec sleep 30", Timeout: time.Minute})
	require.NoError(t, err)
	defer func() {
		p.Kill()
		_, _ = p.Wait()
	}()
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	for _, d := range sb.cg.dirs {
		runs, err := filepath.Glob(filepath.Join(d, "run-*"))
		require.NoError(t, err)
		require.Len(t, runs, 1)
		// bubblewrap's first process, the sandbox's init, and the command (once the
		// shell that said ready has become sleep).
		want := []string{"bwrap", "bwrap", "sleep"}
		var comms []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if comms = cgroupComms(t, runs[0]); slices.Equal(want, comms) {
				break
			}
		}
		require.Equal(t, want, comms, "processes in %s", runs[0])
	}
}

// cgroupComms are the sorted names of the processes in the cgroup v1 at dir.
func cgroupComms(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	require.NoError(t, err)
	var comms []string
	for _, pid := range strings.Fields(string(b)) {
		if c, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil {
			comms = append(comms, strings.TrimSpace(string(c)))
		}
	}
	slices.Sort(comms)
	return comms
}
