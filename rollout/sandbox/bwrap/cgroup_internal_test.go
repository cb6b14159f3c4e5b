package bwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTree writes files under root: path → content.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return root
}

func TestDetectCgroup(t *testing.T) {
	t.Run("v2 with both controllers", func(t *testing.T) {
		root := fakeTree(t, map[string]string{
			"cgroup.controllers":                             "cpuset cpu io memory pids\n",
			"svc.slice/app/cgroup.subtree_control":           "",
			"svc.slice/app/memory.swap.max":                  "max\n",
			"svc.slice/app/cgroup.controllers":               "memory pids\n",
			"svc.slice/app/sandboxes/cgroup.procs":           "",
			"svc.slice/app/sandboxes/cgroup.subtree_control": "memory pids\n",
		})
		h, err := detectCgroup(root, []byte("0::/svc.slice/app\n"), "")
		require.NoError(t, err)
		require.Equal(t, CgroupV2, h.mode)
		require.Equal(t, filepath.Join(root, "svc.slice/app"), h.v2)
		require.True(t, h.swapMax)
		// The controllers were handed down to the sandbox cgroups.
		b, err := os.ReadFile(filepath.Join(root, "svc.slice/app/cgroup.subtree_control"))
		require.NoError(t, err)
		require.Equal(t, "+memory +pids", string(b))

		// A parent given by the operator replaces the process's own cgroup.
		h, err = detectCgroup(root, []byte("0::/svc.slice/app\n"), "/svc.slice/app/sandboxes")
		require.NoError(t, err)
		require.Equal(t, filepath.Join(root, "svc.slice/app/sandboxes"), h.v2)
		require.False(t, h.swapMax)
	})
	t.Run("hybrid: v1 memory and pids, unified without them", func(t *testing.T) {
		root := fakeTree(t, map[string]string{
			"unified/cgroup.controllers":               "hugetlb\n",
			"memory/job/7/memory.limit_in_bytes":       "9223372036854771712\n",
			"memory/job/7/memory.memsw.limit_in_bytes": "9223372036854771712\n",
			"pids/cgroup.procs":                        "",
		})
		self := "9:name=systemd:/\n8:pids:/\n4:memory:/job/7\n0::/\n"
		h, err := detectCgroup(root, []byte(self), "")
		require.NoError(t, err)
		require.Equal(t, CgroupV1, h.mode)
		require.Equal(t, filepath.Join(root, "memory/job/7"), h.memory)
		require.Equal(t, filepath.Join(root, "pids"), h.pids)
		require.True(t, h.memsw)
	})
	t.Run("v2 in a leaf that holds processes", func(t *testing.T) {
		root := fakeTree(t, map[string]string{
			"cgroup.controllers": "memory pids\n",
		})
		// No cgroup.subtree_control to write: the kernel's refusal, as far as the
		// detection can tell.
		_, err := detectCgroup(root, []byte("0::/leaf\n"), "")
		require.Error(t, err)
		require.Contains(t, err.Error(), "cgroup v2")
	})
	t.Run("nothing usable", func(t *testing.T) {
		root := fakeTree(t, map[string]string{"unified/cgroup.controllers": ""})
		_, err := detectCgroup(root, []byte("0::/\n"), "")
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "no memory and pids controllers"), err.Error())
	})
}

func TestParseProcCgroup(t *testing.T) {
	got := parseProcCgroup([]byte("4:memory:/a/b\n3:cpu,cpuacct:/\n0::/x:y\nbad\n"))
	require.Equal(t, []procCgroupLine{
		{id: "4", controllers: []string{"memory"}, path: "/a/b"},
		{id: "3", controllers: []string{"cpu", "cpuacct"}, path: "/"},
		{id: "0", path: "/x:y"},
	}, got)
}

// TestCgroupV2Plumbing runs the v2 code path on the unified hierarchy of a hybrid
// host, where it has no memory or pids controller: a command started straight into
// its cgroup (clone3), found there, killed with cgroup.kill, the cgroups removed.
// The limits themselves need the controllers and are tested where the host has them.
func TestCgroupV2Plumbing(t *testing.T) {
	unified := "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(unified, "cgroup.controllers")); err != nil {
		unified = "/sys/fs/cgroup"
	}
	if _, err := os.Stat(filepath.Join(unified, "cgroup.controllers")); err != nil {
		t.Skip("no cgroup v2 hierarchy mounted")
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	var own string
	for _, l := range parseProcCgroup(self) {
		if l.id == "0" {
			own = l.path
		}
	}
	h := &cgroupHost{mode: CgroupV2, v2: filepath.Join(unified, own)}
	cg, err := h.newSandboxCgroup("agenticopd-test-"+marker8(), 0, 0, -1, -1)
	if err != nil {
		t.Skipf("cannot create a cgroup under %s: %v", h.v2, err)
	}
	defer func() { require.NoError(t, cg.remove()) }()
	cc, err := cg.newCommand(1, false)
	require.NoError(t, err)
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	cc.sysProcAttr(cmd.SysProcAttr)
	require.True(t, cmd.SysProcAttr.UseCgroupFD)
	require.NoError(t, cmd.Start())
	_, err = os.Stat(filepath.Join(cc.dirs[0], "cgroup.kill"))
	require.NoError(t, err, "cgroup.kill (Linux 5.14)")
	require.True(t, inCgroup(cmd.Process.Pid, cc.dirs[0]), "the child started inside its cgroup")
	cc.kill()
	err = cmd.Wait()
	require.Error(t, err)
	require.Equal(t, "signal: killed", err.Error())
	require.NoError(t, cc.remove())
}

func marker8() string { return strconv.FormatInt(time.Now().UnixNano()%1e8, 10) }

// TestCgroupPauses: the looks at a cgroup still emptying start a quarter of a
// millisecond apart and back off to 5 ms, for a second in all, as the fixed 5 ms
// pauses did.
func TestCgroupPauses(t *testing.T) {
	var total, last time.Duration
	n := 0
	for p := range cgroupPauses() {
		if n == 0 {
			require.Equal(t, 250*time.Microsecond, p)
		}
		require.GreaterOrEqual(t, p, last, "pause %d", n)
		require.LessOrEqual(t, p, 5*time.Millisecond, "pause %d", n)
		total += p
		last = p
		n++
	}
	require.GreaterOrEqual(t, total, time.Second)
	require.Less(t, total, time.Second+5*time.Millisecond)
	require.Equal(t, 5*time.Millisecond, last)
}
