package bwrap_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/testuser"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// imageRefEnv passes the test image's reference to a test run again as another user.
const imageRefEnv = "AGENTICOPD_TEST_IMAGE_REF"

// TestImageSandboxWithoutRoot pulls the toy repository's image into a cache and runs
// its tests in image sandboxes as an ordinary user (uid 1000), and checks what holds
// there as it does as root: the working directory an overlay of the image's (no
// copy), the root read-only, no network, no host path in mountinfo, a change that
// stays in its sandbox, the disk quota a tmpfs's, the process limit per sandbox, and
// nothing left once the sandboxes close.
func TestImageSandboxWithoutRoot(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		imageSandboxWithoutRoot(t, dir, os.Getenv(imageRefEnv))
		return
	}
	ref := imagestest.SWERef(t) // packed and served by this process, as root
	out := testuser.Run(t, testuser.Options{Env: []string{imageRefEnv + "=" + ref}})
	t.Logf("as uid %d:\n%s", testuser.UID, out)
}

func imageSandboxWithoutRoot(t *testing.T, dir, ref string) {
	require.Equal(t, testuser.UID, os.Geteuid())
	// The registry is the calling process's: its connections are closed here.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cache, err := images.NewCache(images.CacheConfig{Dir: filepath.Join(dir, "images"), Transport: tr})
	require.NoError(t, err)
	base := filepath.Join(dir, "sandboxes")
	require.NoError(t, os.Mkdir(base, 0o755))
	f := newFactory(t, bwrap.Config{Images: cache, BaseDir: base, DiskQuota: 32 << 20,
		Limits: bwrap.Limits{Processes: 40}})
	require.Equal(t, bwrap.CgroupNone, f.Enforcement().Cgroup, "no cgroup without root")

	sbs := make([]*bwrap.Sandbox, 2)
	for i := range sbs {
		start := time.Now()
		sb, err := f.NewSandboxFor(t.Context(), rollout.SandboxSpec{Image: ref})
		require.NoError(t, err)
		sbs[i] = sb.(*bwrap.Sandbox)
		t.Logf("image sandbox %d made in %v (the first unpacks the image)", i, time.Since(start))
	}
	sb := sbs[0]
	require.False(t, bwrap.ImageCopied(sb), "the working directory is an overlay of the image's")
	require.Equal(t, "/testbed", sb.Dir())
	res := run(t, sb, "id -u && git status --porcelain && git log --oneline | wc -l && python3 -B -m pytest -q -p no:cacheprovider >/dev/null; echo pytest=$?", time.Minute)
	require.Equal(t, "0\n1\npytest=0\n", string(res.Stdout), "stderr %s", res.Stderr)

	// A change by the file tools and one by the code stay in this sandbox.
	require.NoError(t, sb.WriteFile("note.txt", []byte("mine\n")))
	res = run(t, sb, "cat note.txt && echo changed >> README.md 2>/dev/null || echo changed > README.md; git status --porcelain | sort", time.Minute)
	require.Equal(t, "mine\n", strings.SplitN(string(res.Stdout), "\n", 2)[0]+"\n", "stderr %s", res.Stderr)
	require.Contains(t, string(res.Stdout), "?? note.txt")
	res = run(t, sbs[1], "git status --porcelain; ls note.txt 2>&1", time.Minute)
	require.Equal(t, "ls: cannot access 'note.txt': No such file or directory\n", string(res.Stdout))

	// Read-only root, no network, no host path inside.
	res = run(t, sb, "touch /usr/x 2>&1; touch /x 2>&1; grep -c : /proc/net/dev; cat /proc/self/mountinfo", time.Minute)
	out := string(res.Stdout)
	require.Contains(t, out, "touch: cannot touch '/usr/x': Read-only file system")
	require.Contains(t, out, "touch: cannot touch '/x': Read-only file system")
	require.Contains(t, out, "\n1\n", "one interface (lo)")
	require.NotContains(t, out, dir, "a host path in mountinfo")

	// The disk quota: the workspace's layer is a tmpfs of DiskQuota bytes.
	res2, err := sb.RunDetailed(t.Context(), rollout.Command{Shell: "head -c 48000000 /dev/zero > big; echo rc=$?", Timeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res2.DiskQuotaExceeded, "stdout %s stderr %s", res2.Stdout, res2.Stderr)

	// The process limit holds per sandbox: two sandboxes fork up to it at once.
	const forks = `python3 -c '
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
'`
	counts := make([]int, 2)
	var wg sync.WaitGroup
	for i, s := range sbs {
		wg.Go(func() {
			res, err := s.Run(t.Context(), rollout.Command{Shell: forks, Timeout: time.Minute})
			if err == nil {
				counts[i], _ = strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
			}
		})
	}
	wg.Wait()
	for i, n := range counts {
		require.Greater(t, n, 20, "sandbox %d forked", i)
		require.Less(t, n, 40, "sandbox %d forked", i)
	}

	// More commands than the process limit, one after another: what each leaves
	// orphaned in the holder's pid namespace (bubblewrap's sandbox init) is reaped
	// there, and does not count against the limit.
	for i := range 50 {
		res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"/bin/true"}})
		require.NoError(t, err, "command %d", i)
		require.Equal(t, 0, res.ExitCode, "command %d: %s", i, res.Stderr)
	}

	for _, s := range sbs {
		require.NoError(t, s.Close())
	}
	left, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Empty(t, left, "sandbox directories left")
	require.Equal(t, int64(1), cache.Stats().Unpacks)
}

// baseDirEnv passes a base directory to a test run again as another user.
const baseDirEnv = "AGENTICOPD_TEST_BASE_DIR"

// TestImageSandboxesRefusedAtStart runs as an ordinary user whose base directory is
// on a file system no overlay can be stacked on (an overlay of an overlay, at the
// kernel's stacking limit), as on a kernel without overlayfs in user namespaces:
// plain sandboxes work (their workspace bound as a directory), and a factory for
// images is refused by New with the reason, not at its first image.
func TestImageSandboxesRefusedAtStart(t *testing.T) {
	if _, ok := testuser.Dir(); ok {
		base := os.Getenv(baseDirEnv)
		f := newFactory(t, bwrap.Config{BaseDir: base})
		res := run(t, newSandbox(t, f), "echo plain", time.Minute)
		require.Equal(t, "plain\n", string(res.Stdout))

		_, err := bwrap.New(t.Context(), bwrap.Config{BaseDir: base, Images: &imageSource{}})
		require.ErrorIs(t, err, bwrap.ErrImageUnsupported)
		var pe *bwrap.ProbeError
		require.ErrorAs(t, err, &pe)
		require.Contains(t, pe.Err.Error(), "overlay")
		require.Contains(t, pe.Advice, "the kernel refused one whose lower layer is on the file system of Config.BaseDir")
		t.Logf("refused: %v", err)
		return
	}
	base := testuser.NoOverlayDir(t)
	t.Log(testuser.Run(t, testuser.Options{Env: []string{baseDirEnv + "=" + base}}))
}

// TestImageSandboxesRefusedWithoutUserNamespaces runs as an ordinary user where no
// user namespace can be made: New refuses, whether or not images are asked for.
func TestImageSandboxesRefusedWithoutUserNamespaces(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		_, err := bwrap.New(t.Context(), bwrap.Config{BaseDir: dir, Images: &imageSource{}})
		require.ErrorIs(t, err, bwrap.ErrNamespacesDenied)
		t.Logf("refused: %v", err)
		return
	}
	t.Log(testuser.Run(t, testuser.Options{LimitUserNamespaces: true}))
}

// TestGoBuildCacheWithoutRoot: as an ordinary user, a Go repository's image sandboxes
// share a build cache warmed once (the warm-up's GOCACHE bound from the image
// cache's directory, then the warm cache below an overlay layer of each sandbox's
// own), and what one sandbox does to it, though its files are the code's uid's,
// stays in that sandbox.
func TestGoBuildCacheWithoutRoot(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cache, err := images.NewCache(images.CacheConfig{Dir: filepath.Join(dir, "images"), Transport: tr})
		require.NoError(t, err)
		ref := os.Getenv(imageRefEnv)
		// The layers on a tmpfs, then on the disk (the Go cache's on a tmpfs of its
		// own); the second factory finds the cache the first warmed.
		for i, cfg := range []bwrap.Config{{}, {DisableWorkspaceMount: true}} {
			cfg.Images, cfg.BaseDir = cache, filepath.Join(dir, "sandboxes"+strconv.Itoa(i))
			require.NoError(t, os.Mkdir(cfg.BaseDir, 0o755))
			f := newFactory(t, cfg)
			agent := newImageSandbox(t, f, rollout.SandboxSpec{Image: ref})
			res := run(t, agent, `echo "$GOCACHE"; cat "$GOCACHE/ab/entry-a" "$GOCACHE/calls"`, time.Minute)
			require.Equal(t, bwrap.GoCacheDir+"\ntrusted\nbuild ./...\ntest -count=1 -run ^$ -exec /bin/true ./...\n", string(res.Stdout), "stderr %s", res.Stderr)
			res = run(t, agent, `echo forged > "$GOCACHE/ab/entry-a"`, time.Minute)
			require.NotZero(t, res.ExitCode, "a warm file written in place")
			res = run(t, agent, `set -e; chmod 666 "$GOCACHE/ab/entry-a"; echo forged > "$GOCACHE/ab/entry-a"; echo new > "$GOCACHE/ab/forged-b"; cat "$GOCACHE/ab/entry-a"`, time.Minute)
			require.Equal(t, "forged\n", string(res.Stdout), "stderr %s", res.Stderr)

			grading := newImageSandbox(t, f, rollout.SandboxSpec{Image: ref})
			res = run(t, grading, `ls "$GOCACHE/ab"; cat "$GOCACHE/ab/entry-a"`, time.Minute)
			require.Equal(t, "entry-a\ntrusted\n", string(res.Stdout), "stderr %s", res.Stderr)
		}
		return
	}
	// The toy image with a go.mod in its working directory and a fake go command.
	layer := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(layer, "testbed"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(layer, "usr/local/bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(layer, "testbed/go.mod"), []byte("module example.com/toy\n\ngo 1.19\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(layer, "usr/local/bin/go"), []byte(fakeGo), 0o755))
	swe := mustRef(t, imagestest.SWERef(t))
	src, err := remote.Image(swe)
	require.NoError(t, err)
	layers, err := src.Layers()
	require.NoError(t, err)
	goLayer, err := imagestest.DirLayer(layer)
	require.NoError(t, err)
	cfg := imagestest.SWEConfig()
	cfg.Env = append(cfg.Env, "PATH=/usr/local/bin:/usr/bin:/bin")
	img, err := imagestest.ImageOf(cfg, append(layers, goLayer)...)
	require.NoError(t, err)
	// Pushed beside the toy image, whose layers that registry already holds.
	ref := swe.Context().Registry.Name() + "/swe/fakego:latest"
	require.NoError(t, remote.Write(mustRef(t, ref), img))
	t.Log(testuser.Run(t, testuser.Options{Env: []string{imageRefEnv + "=" + ref}}))
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	return r
}

// TestHostileWithoutRoot runs the hostile suite's image cases as an ordinary user
// (uid 1000), over the toy repository's image pulled into an image cache that user
// owns. The cases that need a cgroup skip (there is none without root); the process
// limit without one is TestImageSandboxWithoutRoot's.
func TestHostileWithoutRoot(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cache, err := images.NewCache(images.CacheConfig{Dir: filepath.Join(dir, "images"), Transport: tr})
		require.NoError(t, err)
		ref := os.Getenv(imageRefEnv)
		root, err := cache.Root(t.Context(), ref)
		require.NoError(t, err)
		t.Cleanup(root.Release)
		hostileSuite(t, cache, ref, root.Dir, false)
		return
	}
	t.Log(testuser.Run(t, testuser.Options{Env: []string{imageRefEnv + "=" + imagestest.SWERef(t)}}))
}

// TestImageSandboxAfterSIGKILLWithoutRoot kills (SIGKILL), as an ordinary user, a
// library process while a command runs in its image sandbox: the command's
// processes and the holder of the sandbox's namespaces die with it, and the next New
// on the same base directory removes the directory it left. The image's files are
// untouched. (The holder is the init of the sandbox's pid namespace: when the library
// dies, so does it, and the kernel kills everything in the namespace, bubblewrap
// included, whatever became of its parent-death signal.)
func TestImageSandboxAfterSIGKILLWithoutRoot(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cache, err := images.NewCache(images.CacheConfig{Dir: filepath.Join(dir, "images"), Transport: tr})
		require.NoError(t, err)
		root, err := cache.Root(t.Context(), os.Getenv(imageRefEnv))
		require.NoError(t, err)
		t.Cleanup(root.Release)
		base := filepath.Join(dir, "sandboxes")
		require.NoError(t, os.Mkdir(base, 0o755))
		m := marker()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperImageLibraryProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), imageHelperEnv+"="+base+":"+m+":"+root.Dir)
		require.NoError(t, cmd.Start())
		for len(hostProcs(t, "sleep", m+"2")) == 0 {
			require.NoError(t, cmd.Process.Signal(syscall.Signal(0)), "the library process ended before its command ran")
			time.Sleep(20 * time.Millisecond)
		}
		left, err := filepath.Glob(filepath.Join(base, "agenticopd-sandbox-*"))
		require.NoError(t, err)
		require.Len(t, left, 1)
		holders := procsIn(t, left[0])
		require.NotEmpty(t, holders, "the holder of the sandbox's namespaces runs in its directory")
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		deadline := time.Now().Add(time.Minute) // a failure guard only
		for len(hostProcs(t, "sleep", m)) > 0 || len(procsIn(t, left[0])) > 0 {
			require.True(t, time.Now().Before(deadline), "sandbox processes %s or the holder %s outlived the library process",
				cmdlines(hostProcs(t, "sleep", m)), cmdlines(procsIn(t, left[0])))
			time.Sleep(10 * time.Millisecond)
		}
		require.DirExists(t, left[0], "the dead process's sandbox (before the next New)")
		newFactory(t, bwrap.Config{BaseDir: base})
		entries, err := os.ReadDir(base)
		require.NoError(t, err)
		require.Empty(t, entries, "directories left in the base directory")
		require.NoFileExists(t, filepath.Join(root.Dir, "testbed", "calc.py"), "the command's file reached the image")
		return
	}
	t.Log(testuser.Run(t, testuser.Options{Env: []string{imageRefEnv + "=" + imagestest.SWERef(t)}}))
}

// cmdlines describes processes: pid, state and command line each.
func cmdlines(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		cl, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		fmt.Fprintf(&b, "[%d %q %s] ", p, strings.ReplaceAll(string(cl), "\x00", " "), st)
	}
	return b.String()
}

// procsIn lists the processes whose working directory is dir.
func procsIn(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}
