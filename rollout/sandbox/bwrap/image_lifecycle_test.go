package bwrap_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// mountsUnder lists the mount points of this process's namespace under dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// TestImageSandboxLeavesNothing: after Close, no mount, directory or cgroup of an
// image sandbox is left, in either workspace mode, and its root is released once.
func TestImageSandboxLeavesNothing(t *testing.T) {
	src := &imageSource{}
	src.add(t, "repo:1", under("testbed", repoFiles), bwrap.ImageRoot{WorkingDir: "/testbed"})
	src.addOverlay(t, "repo:overlayfs", under("testbed", repoFiles), bwrap.ImageRoot{WorkingDir: "/testbed"})
	for _, mode := range imageModes {
		t.Run(mode.name, func(t *testing.T) {
			base := reachableTempDir(t)
			cfg := mode.cfg
			cfg.Images, cfg.BaseDir = src, base
			f := newFactory(t, cfg)
			sb, err := f.NewSandboxFor(t.Context(), rollout.SandboxSpec{Image: mode.ref})
			require.NoError(t, err)
			res := run(t, sb, "echo x > new && sleep 0.1 & echo y > /tmp/y; wait", 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			dir := filepath.Dir(sb.(*bwrap.Sandbox).HostDir())
			require.NotEmpty(t, mountsUnder(t, base), "the sandbox's mounts while it is open")
			cgroups := []string{}
			for _, parent := range f.Enforcement().CgroupDirs {
				cgroups = append(cgroups, filepath.Join(parent, filepath.Base(dir)))
				require.DirExists(t, cgroups[len(cgroups)-1])
			}
			released := src.released.Load()
			require.NoError(t, sb.Close())
			require.Equal(t, released+1, src.released.Load(), "the root is released at Close")
			require.Empty(t, mountsUnder(t, base))
			entries, err := os.ReadDir(base)
			require.NoError(t, err)
			require.Empty(t, entries)
			for _, c := range cgroups {
				require.NoDirExists(t, c)
			}
			require.NoError(t, sb.Close(), "Close is idempotent")
			require.Equal(t, released+1, src.released.Load(), "released once")
		})
	}
}

// imageHelperEnv makes the test binary act as a library process with an image
// sandbox that is killed mid-command.
const imageHelperEnv = "AGENTICOPD_SANDBOX_IMAGE_HELPER"

// fixedRoot is a RootSource of one directory.
type fixedRoot string

func (d fixedRoot) Root(context.Context, string) (bwrap.ImageRoot, error) {
	return bwrap.ImageRoot{Dir: string(d), WorkingDir: "/testbed"}, nil
}

// TestImageSandboxAfterSIGKILL kills (SIGKILL) a library process while a command
// runs in its image sandbox: the command's processes die with it, and the next New
// on the same base directory removes every mount (the overlays and the tmpfs), the
// directory and the cgroups it left. The image's files are untouched.
func TestImageSandboxAfterSIGKILL(t *testing.T) {
	if os.Getenv(imageHelperEnv) != "" {
		return // the helper runs in TestHelperImageLibraryProcess
	}
	src := &imageSource{}
	imageDir := src.add(t, "repo", under("testbed", repoFiles), bwrap.ImageRoot{})
	base := reachableTempDir(t)
	m := marker()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperImageLibraryProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), imageHelperEnv+"="+base+":"+m+":"+imageDir)
	require.NoError(t, cmd.Start())
	waitForSleep(t, m+"2")
	left, err := filepath.Glob(filepath.Join(base, "agenticopd-sandbox-*"))
	require.NoError(t, err)
	require.Len(t, left, 1)
	stale := filepath.Base(left[0])
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	deadline := time.Now().Add(5 * time.Second) // a failure guard only
	for len(hostProcs(t, "sleep", m)) > 0 {
		require.True(t, time.Now().Before(deadline), "sandbox processes outlived the library process")
		time.Sleep(10 * time.Millisecond)
	}
	require.NotEmpty(t, mountsUnder(t, base), "the dead process's mounts (before the next New)")
	cgroups := sandboxCgroupDirs(t, stale)

	newFactory(t, bwrap.Config{BaseDir: base})
	require.Empty(t, mountsUnder(t, base), "mounts left under the base directory")
	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Empty(t, entries, "directories left in the base directory")
	for _, dir := range cgroups {
		require.NoDirExists(t, dir, "the dead sandbox's cgroup")
	}
	b, err := os.ReadFile(filepath.Join(imageDir, "testbed/calc.py"))
	require.NoError(t, err)
	require.Equal(t, repoFiles["calc.py"], string(b), "the image's files")
}

// TestHelperImageLibraryProcess is the process TestImageSandboxAfterSIGKILL kills.
func TestHelperImageLibraryProcess(t *testing.T) {
	env := os.Getenv(imageHelperEnv)
	if env == "" {
		t.Skip("helper process for TestImageSandboxAfterSIGKILL")
	}
	parts := strings.SplitN(env, ":", 3)
	f := newFactory(t, bwrap.Config{BaseDir: parts[0], Images: fixedRoot(parts[2])})
	sb := newImageSandbox(t, f, rollout.SandboxSpec{Image: "repo"})
	m := parts[1]
	_, _ = sb.Run(t.Context(), rollout.Command{
		Shell:   "echo fix >> calc.py; sleep " + m + "1 & setsid sleep " + m + "2 & sleep " + m + "3",
		Timeout: time.Minute,
	})
	t.Error("the helper should have been killed")
}
