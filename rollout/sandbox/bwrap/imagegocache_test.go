package bwrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// fakeGo stands in for the go command in the Go cache tests (the real toolchain's
// cache is graded in package reward's tests): each call is recorded in
// $GOCACHE/calls, and the warm-up's go test (the one with -run) writes an entry.
const fakeGo = `#!/bin/sh
set -e
echo "$*" >> "$GOCACHE/calls" || true # a warm file, outside the warm-up
if [ "$1" = test ] && [ "$3" = "-run" ]; then
	mkdir -p "$GOCACHE/ab"
	echo trusted > "$GOCACHE/ab/entry-a"
fi
`

// addGoImage registers ref as a Go repository's image: a go command on its PATH and
// a module at /testbed, with env as the image's Env (after PATH) and cacheDir as
// the root's CacheDir. It returns the image's root.
func addGoImage(t *testing.T, src *imageSource, ref, cacheDir string, env ...string) string {
	t.Helper()
	files := under("testbed", gitRepo(t, map[string]string{"go.mod": "module example.com/toy\n\ngo 1.19\n", "toy.go": "package toy\n"}))
	files["usr/local/bin/go"] = fakeGo
	dir := src.add(t, ref, files, bwrap.ImageRoot{
		Env: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...), WorkingDir: "/testbed", CacheDir: cacheDir})
	require.NoError(t, os.Chmod(filepath.Join(dir, "usr/local/bin/go"), 0o755))
	return dir
}

// warmCaches lists the warm caches under cacheDir.
func warmCaches(t *testing.T, cacheDir string) []string {
	t.Helper()
	var dirs []string
	ents, err := os.ReadDir(cacheDir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(cacheDir, e.Name()))
		}
	}
	return dirs
}

// TestGoBuildCacheShared: a Go repository's image sandboxes share a build cache
// warmed once, before any of them, by the library's own go command in a sandbox of
// the pristine image; what one sandbox writes there (a forged entry, a replaced
// one, an edited one) stays in that sandbox, so the next one (a grading) sees the
// warm cache only; the cache is outside the working directory, so never in the
// diff; and other factories (processes) sharing the image's CacheDir use it as it
// is, without warming again.
func TestGoBuildCacheShared(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  bwrap.Config
	}{{"tmpfs", bwrap.Config{}}, {"on-disk", bwrap.Config{DisableWorkspaceMount: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			src := &imageSource{}
			cacheDir := filepath.Join(t.TempDir(), "derived")
			addGoImage(t, src, "go:1", cacheDir)
			cfg := mode.cfg
			cfg.Images = src
			f := newFactory(t, cfg)

			agent := newImageSandbox(t, f, rollout.SandboxSpec{Image: "go:1"})
			warm := warmCaches(t, cacheDir)
			require.Len(t, warm, 1, "one warm cache")
			res := run(t, agent, `echo "$GOCACHE"; cat "$GOCACHE/ab/entry-a" "$GOCACHE/calls"`, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, bwrap.GoCacheDir+"\ntrusted\nbuild ./...\ntest -count=1 -run ^$ -exec /bin/true ./...\n", string(res.Stdout))

			// The warm files cannot be changed in place, not even their times.
			for _, attack := range []string{
				`echo forged > "$GOCACHE/ab/entry-a"`,
				`echo forged >> "$GOCACHE/ab/entry-a"`,
				`touch -d 2000-01-01 "$GOCACHE/ab/entry-a"`,
				`chmod 666 "$GOCACHE/ab/entry-a"`,
			} {
				res := run(t, agent, attack, 20*time.Second)
				require.NotZero(t, res.ExitCode, "%s succeeded", attack)
			}
			// What the go command does, adding entries and replacing files, works
			// in the sandbox's own layer.
			res = run(t, agent, `set -e; echo forged > "$GOCACHE/ab/forged-a"; rm "$GOCACHE/ab/entry-a"; echo forged > "$GOCACHE/ab/entry-a"
mkdir "$GOCACHE/new"; go build ./...; cat "$GOCACHE/ab/entry-a"; git status --porcelain --ignored`, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, "forged\n", string(res.Stdout), "the cache is not in the working tree")

			grading := newImageSandbox(t, f, rollout.SandboxSpec{Image: "go:1"})
			res = run(t, grading, `ls "$GOCACHE/ab"; cat "$GOCACHE/ab/entry-a" "$GOCACHE/calls"; ls "$GOCACHE/new" 2>&1 >/dev/null | wc -l`, 20*time.Second)
			require.Equal(t, "entry-a\ntrusted\nbuild ./...\ntest -count=1 -run ^$ -exec /bin/true ./...\n1\n", string(res.Stdout), "stderr %s", res.Stderr)

			// On the host the warm cache is root's and read-only.
			entry := filepath.Join(warm[0], "ab", "entry-a")
			fi, err := os.Stat(entry)
			require.NoError(t, err)
			st := fi.Sys().(*syscall.Stat_t)
			require.Equal(t, [3]uint32{0, 0, 0o444}, [3]uint32{st.Uid, st.Gid, uint32(fi.Mode().Perm())})
			b, err := os.ReadFile(entry)
			require.NoError(t, err)
			require.Equal(t, "trusted\n", string(b))

			// Another factory sharing the image's CacheDir (another process) uses the
			// warm cache: no second warm-up.
			other := newImageSandbox(t, newFactory(t, cfg), rollout.SandboxSpec{Image: "go:1"})
			res = run(t, other, `cat "$GOCACHE/calls"`, 20*time.Second)
			require.Equal(t, 2, strings.Count(string(res.Stdout), "\n"), "stdout %s", res.Stdout)
			require.Equal(t, warm, warmCaches(t, cacheDir))
		})
	}
}

// TestGoBuildCacheWarmedOnce: sandboxes of a new Go image asked for at once, by two
// factories, wait for one warm-up.
func TestGoBuildCacheWarmedOnce(t *testing.T) {
	src := &imageSource{}
	cacheDir := filepath.Join(t.TempDir(), "derived")
	addGoImage(t, src, "go:1", cacheDir)
	factories := []*bwrap.Factory{newFactory(t, bwrap.Config{Images: src}), newFactory(t, bwrap.Config{Images: src})}
	var wg sync.WaitGroup
	sbs := make([]rollout.Sandbox, 4)
	errs := make([]error, 4)
	for i := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = factories[i%2].NewSandboxFor(t.Context(), rollout.SandboxSpec{Image: "go:1"})
		}()
	}
	wg.Wait()
	for i, sb := range sbs {
		require.NoError(t, errs[i])
		t.Cleanup(func() { require.NoError(t, sb.Close()) })
	}
	warm := warmCaches(t, cacheDir)
	require.Len(t, warm, 1)
	b, err := os.ReadFile(filepath.Join(warm[0], "calls"))
	require.NoError(t, err)
	require.Equal(t, "build ./...\ntest -count=1 -run ^$ -exec /bin/true ./...\n", string(b))
}

// TestGoBuildCacheWhere: the image's own GOCACHE is the mount point when it can be
// one; one in the working directory (it would be in the diff), or one the sandbox
// mounts itself, gives way to bwrap.GoCacheDir; an image that is not a Go
// repository's, or a factory told not to, gets no GOCACHE; without a CacheDir the
// cache is the sandbox's own, empty at the start.
func TestGoBuildCacheWhere(t *testing.T) {
	src := &imageSource{}
	cacheDir := t.TempDir()
	addGoImage(t, src, "go:own", filepath.Join(cacheDir, "own"), "GOCACHE=/root/.cache/go-build")
	addGoImage(t, src, "go:workdir", filepath.Join(cacheDir, "workdir"), "GOCACHE=/testbed/.cache/go")
	addGoImage(t, src, "go:tmp", filepath.Join(cacheDir, "tmp"), "GOCACHE=/tmp/go")
	addGoImage(t, src, "go:nocachedir", "")
	src.add(t, "python:1", under("testbed", gitRepo(t, repoFiles)), bwrap.ImageRoot{
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, WorkingDir: "/testbed", CacheDir: filepath.Join(cacheDir, "python")})
	f := newFactory(t, bwrap.Config{Images: src})
	for _, tc := range []struct {
		ref, want string
		warm      bool
	}{
		{"go:own", "/root/.cache/go-build", true},
		{"go:workdir", bwrap.GoCacheDir, true},
		{"go:tmp", bwrap.GoCacheDir, true},
		{"go:nocachedir", bwrap.GoCacheDir, false},
		{"python:1", "unset", false},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			for range 2 {
				sb := newImageSandbox(t, f, rollout.SandboxSpec{Image: tc.ref})
				res := run(t, sb, `echo "${GOCACHE-unset}"; ls -A "${GOCACHE-/nonexistent}" 2>/dev/null | tr '\n' ' '; echo; touch "${GOCACHE-/x}/mine"; git status --porcelain --ignored`, 20*time.Second)
				want := tc.want + "\n\n"
				if tc.warm {
					want = tc.want + "\nab calls \n"
				}
				require.Equal(t, want, string(res.Stdout), "stderr %s", res.Stderr)
			}
		})
	}
	_, err := os.Stat(filepath.Join(cacheDir, "python"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is derived from an image that is not a Go repository's")

	off := newFactory(t, bwrap.Config{Images: src, DisableGoBuildCache: true})
	res := run(t, newImageSandbox(t, off, rollout.SandboxSpec{Image: "go:own"}), `echo "${GOCACHE-unset}"`, 20*time.Second)
	require.Equal(t, "/root/.cache/go-build\n", string(res.Stdout), "the image's own, unmounted")
	res = run(t, newImageSandbox(t, off, rollout.SandboxSpec{Image: "go:nocachedir"}), `echo "${GOCACHE-unset}"`, 20*time.Second)
	require.Equal(t, "unset\n", string(res.Stdout))
}

// TestGoBuildCacheBounded: what a sandbox writes into its Go build cache counts
// towards its storage bound, as what it writes in its workspace.
func TestGoBuildCacheBounded(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  bwrap.Config
	}{{"tmpfs", bwrap.Config{DiskQuota: 16 << 20}}, {"on-disk", bwrap.Config{DiskQuota: 16 << 20, DisableWorkspaceMount: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			src := &imageSource{}
			addGoImage(t, src, "go:1", filepath.Join(t.TempDir(), "derived"))
			cfg := mode.cfg
			cfg.Images = src
			sb := newImageSandbox(t, newFactory(t, cfg), rollout.SandboxSpec{Image: "go:1"})
			res := run(t, sb, `head -c 32M /dev/zero > "$GOCACHE/big"`, 30*time.Second)
			require.NotZero(t, res.ExitCode, "a 32 MiB write past a 16 MiB bound succeeded")
		})
	}
}
