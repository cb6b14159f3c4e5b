package reward_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// goAddressSpace is the address space (RLIMIT_AS) of a process in a sandbox of the
// Go image.
const goAddressSpace = 4 << 30

// goTask is the Go toy task of testdata/swe-go.
func goTask(t testing.TB) tasks.Task {
	t.Helper()
	ts, err := tasks.LoadSWE(filepath.Join("..", "testdata", "swe-go", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	return ts[0]
}

// goFactory makes the sandboxes of the Go toy image (imagestest.SWEGoRef) from an
// image cache of its own, in dir. With cold, the image's root comes without a
// CacheDir: every sandbox compiles from an empty build cache of its own, as before
// the shared cache.
type goFactory struct {
	sf    rollout.SpecFactory
	ref   string
	cache *images.Cache
}

func newGoFactory(t testing.TB, cold bool) *goFactory {
	t.Helper()
	ref := imagestest.SWEGoRef(t)
	cache, err := images.NewCache(images.CacheConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	var src bwrap.RootSource = cache
	if cold {
		src = noCacheDir{cache}
	}
	// The go command reserves more address space than RLIMIT_AS's default of 1 GiB
	// lets it: about one grading in ten aborts (runtime/cgo: pthread_create failed)
	// when a thread's stack cannot be mapped. The cgroup still holds memory to 1 GiB.
	f, err := bwrap.New(context.Background(), bwrap.Config{Images: src, Limits: bwrap.Limits{AddressSpace: goAddressSpace}})
	require.NoError(t, err)
	return &goFactory{sf: f, ref: ref, cache: cache}
}

func (g *goFactory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	return g.sf.NewSandboxFor(ctx, rollout.SandboxSpec{Image: g.ref, WorkDir: tasks.DefaultWorkDir})
}

// noCacheDir hands out an image cache's roots without their CacheDir.
type noCacheDir struct{ c *images.Cache }

func (n noCacheDir) Root(ctx context.Context, ref string) (bwrap.ImageRoot, error) {
	r, err := n.c.Root(ctx, ref)
	r.CacheDir = ""
	return r, err
}

// warmCacheSums returns the SHA-256 of every file of the image's warm Go build
// cache, by path, read on the host.
func warmCacheSums(t *testing.T, g *goFactory) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(g.cache.Dir(), "roots", "*", "derived", "go-*"))
	require.NoError(t, err)
	var warm []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			warm = append(warm, d)
		}
	}
	require.Len(t, warm, 1, "one warm cache: %v", dirs)
	sums := map[string]string{}
	require.NoError(t, filepath.WalkDir(warm[0], func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(warm[0], p)
		sums[rel] = hex.EncodeToString(sum[:])
		return err
	}))
	return sums
}

// sandboxCacheSums is what a sandbox sees in its GOCACHE, in the format of
// warmCacheSums.
func sandboxCacheSums(t *testing.T, sb rollout.Sandbox) map[string]string {
	t.Helper()
	res, err := sb.Run(t.Context(), rollout.Command{Shell: `cd "$GOCACHE" && find . -type f -exec sha256sum {} + >"$OLDPWD/.git/cache.sums"`, Timeout: time.Minute})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
	b, err := sb.ReadFile(".git/cache.sums")
	require.NoError(t, err)
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		require.True(t, ok, "line %q", line)
		sums[strings.TrimPrefix(file, "./")] = sum
	}
	return sums
}

// TestVerifyGoTask grades the Go toy task (go test -v, Go 1.19) in the real image
// sandbox with the shared build cache: the gold patch resolves it, the empty patch
// does not. Then an agent poisons its build cache (every compile output and index
// entry it can see replaced with garbage, a forged entry added) and cannot reach
// its own grading: the grading sandbox's cache is the warm one, byte for byte, and
// the grades are those of its diff.
func TestVerifyGoTask(t *testing.T) {
	g := newGoFactory(t, false)
	task := goTask(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		patch string
		rule  reward.Rule
		c     float64
	}{
		{"gold", reward.PatchGold, reward.RuleResolved, 1.0},
		{"empty", reward.PatchEmpty, reward.RuleUnresolved, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			v, err := reward.VerifyPatch(ctx, g, task, tc.patch, reward.RepoOptions{})
			require.NoError(t, err)
			t.Logf("graded in %.1f s", time.Since(start).Seconds()) // the first grading pulls, unpacks and warms
			require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.Equal(t, tc.c, v.Correctness)
			require.Equal(t, 1.0, v.Repo.P2PRate, v.Output)
		})
	}

	t.Run("the agent poisons its build cache", func(t *testing.T) {
		warm := warmCacheSums(t, g)
		require.Greater(t, len(warm), 100, "the warm cache holds the compiled packages")
		for _, fix := range []struct {
			patch string
			rule  reward.Rule
		}{{"", reward.RuleUnresolved}, {task.Repo.GoldPatch, reward.RuleResolved}} {
			agent, err := g.NewSandbox(ctx)
			require.NoError(t, err)
			defer agent.Close()
			require.NoError(t, reward.PrepareRepo(ctx, agent, task.Repo))
			// Every file of the cache replaced (an entry's index and its output),
			// and one added: in a cache the grading shared, the compile of the
			// packages under test would take these in place of its own work.
			res, err := agent.Run(ctx, rollout.Command{Shell: `set -e
cd "$GOCACHE"
find . -type f | while read -r f; do rm -f "$f"; printf 'v1 forged\n' > "$f"; done
echo forged > ab/forged-a
test "$(cat README)" = 'v1 forged'`, Timeout: 5 * time.Minute})
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			if fix.patch != "" {
				res, err = agent.Run(ctx, rollout.Command{Shell: "git apply -", Stdin: []byte(fix.patch), Timeout: time.Minute})
				require.NoError(t, err)
				require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			}
			v, err := reward.VerifyRepo(ctx, agent, g, task, reward.RepoOptions{})
			require.NoError(t, err)
			require.Equal(t, fix.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.Empty(t, v.Repo.Discarded, "the cache is not in the agent's diff")
		}
		grading, err := g.NewSandbox(ctx)
		require.NoError(t, err)
		defer grading.Close()
		require.Equal(t, warm, sandboxCacheSums(t, grading), "a fresh sandbox sees the warm cache as sealed")
		require.Equal(t, warm, warmCacheSums(t, g), "the warm cache on the host is untouched")
	})

	t.Run("grading compiles from the warm cache", func(t *testing.T) {
		sb, err := g.NewSandbox(ctx)
		require.NoError(t, err)
		defer sb.Close()
		// Files the go command wrote in this sandbox have this year's mtime; the
		// warm ones are dated far ahead. Building what the warm-up built adds
		// nothing to the cache.
		res, err := sb.Run(ctx, rollout.Command{Shell: `go build ./... && go test -count=1 -run '^$' -exec /bin/true ./... >/dev/null &&
find "$GOCACHE" -type f ! -newermt 2100-01-01 ! -name trim.txt | wc -l`, Timeout: 5 * time.Minute})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
		require.Equal(t, "0", strings.TrimSpace(string(res.Stdout)), "entries compiled again")
	})
}

// BenchmarkVerifyGoTask grades the Go toy task with its gold patch (a sandbox for
// the change, one for grading, git, the test patch, go test -v ./...): "warm" with
// the image's shared build cache (warmed before the timer starts), "cold" as before
// it, each sandbox compiling from an empty cache of its own. It reports seconds per
// grading.
func BenchmarkVerifyGoTask(b *testing.B) {
	for _, mode := range []struct {
		name string
		cold bool
	}{{"warm", false}, {"cold", true}} {
		b.Run(mode.name, func(b *testing.B) {
			g := newGoFactory(b, mode.cold)
			task := goTask(b)
			ctx := context.Background()
			_, err := reward.VerifyPatch(ctx, g, task, reward.PatchGold, reward.RepoOptions{}) // pull, unpack, warm once
			require.NoError(b, err)
			var secs []float64
			for b.Loop() {
				start := time.Now()
				v, err := reward.VerifyPatch(ctx, g, task, reward.PatchGold, reward.RepoOptions{})
				secs = append(secs, time.Since(start).Seconds())
				require.NoError(b, err)
				require.Equal(b, reward.RuleResolved, v.Rule, v.Output)
			}
			sort.Float64s(secs)
			b.ReportMetric(secs[len(secs)/2], "s/grading")
		})
	}
}
