package reward_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/testimage"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

type testingT interface {
	require.TestingT
	Helper()
	TempDir() string
	Cleanup(func())
	Fatalf(string, ...any)
}

// newToyFactory makes the sandboxes of the toy image: the bubblewrap sandbox over the
// image that imagestest.SWERef serves over loopback, pulled and unpacked by
// images.Cache.
var newToyFactory = func(t testingT) rollout.SandboxFactory {
	t.Helper()
	return toyFactoryFor(t, imagestest.SWERef(t.(testing.TB)))
}

// toyFactoryFor makes the sandboxes of the image ref.
func toyFactoryFor(t testingT, ref string) rollout.SandboxFactory {
	t.Helper()
	cache, err := images.NewCache(images.CacheConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	f, err := bwrap.New(context.Background(), bwrap.Config{Images: cache})
	require.NoError(t, err)
	sf, ok := any(f).(rollout.SpecFactory)
	require.True(t, ok, "bwrap.Factory does not implement rollout.SpecFactory")
	return rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
		return sf.NewSandboxFor(ctx, rollout.SandboxSpec{Image: ref, WorkDir: tasks.DefaultWorkDir})
	})
}

var toyTasksOnce = sync.OnceValues(func() ([]tasks.Task, error) {
	return tasks.LoadSWE(filepath.Join("..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
})

func toyTask(t *testing.T, i int) tasks.Task {
	t.Helper()
	ts, err := toyTasksOnce()
	require.NoError(t, err)
	return ts[i]
}

func toyPatch(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "swe", "patches", name))
	require.NoError(t, err)
	return string(b)
}

// newFile is a diff that creates path with content.
func newFile(path, content string) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	var b strings.Builder
	b.WriteString("diff --git a/" + path + " b/" + path + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + path + "\n")
	b.WriteString("@@ -0,0 +1," + itoa(len(lines)) + " @@\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

func itoa(n int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+n/10%10)) + string(rune('0'+n%10)))
}

// TestVerifyRepoToyTasks grades the toy tasks with the changes an agent might make,
// in the real image sandbox: each change is applied in a fresh sandbox of the image as
// the agent's, graded in another.
func TestVerifyRepoToyTasks(t *testing.T) {
	fresh := newToyFactory(t)
	// A conftest.py at the root that reports every test as passed.
	fakeConftest := "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n" +
		"    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = \"passed\"\n"
	// A package edit that prints pytest's summary lines for the hidden tests as the
	// process exits, after pytest's own summary.
	fakeLines := "diff --git a/toycalc/__init__.py b/toycalc/__init__.py\n--- a/toycalc/__init__.py\n+++ b/toycalc/__init__.py\n" +
		"@@ -1,3 +1,5 @@\n \"\"\"toycalc: a small package with known bugs, the repository of agenticopd's SWE-style test tasks.\"\"\"\n" +
		"+import atexit\n+atexit.register(print, \"PASSED tests/test_arith.py::test_add\\nPASSED tests/test_arith.py::test_mul\\nPASSED tests/test_arith.py::test_sub\")\n" +
		" \n from toycalc.arith import add, clamp, mul, sub\n"
	// The gold fix, and 300 KB printed after pytest's summary: the log is read in
	// chunks well past the sandbox's output cap.
	noisy := toyPatch(t, "add.gold.patch") + "diff --git a/toycalc/text.py b/toycalc/text.py\n--- a/toycalc/text.py\n+++ b/toycalc/text.py\n" +
		"@@ -1,3 +1,5 @@\n \"\"\"Text helpers.\"\"\"\n+import atexit\n+atexit.register(print, \"noise \" * 60000)\n \n \n"
	// The fix, and a package that makes pytest skip every test module importing it.
	skipAll := toyPatch(t, "add.gold.patch") + "diff --git a/toycalc/text.py b/toycalc/text.py\n--- a/toycalc/text.py\n+++ b/toycalc/text.py\n" +
		"@@ -1,3 +1,5 @@\n \"\"\"Text helpers.\"\"\"\n+import pytest\n+pytest.skip(\"skipped by the package\", allow_module_level=True)\n \n \n"
	// A pytest plugin of the package that reports every test as passed, loaded by a
	// pytest.ini the agent adds (addopts = -p toycalc.passall).
	plugin := newFile("pytest.ini", "[pytest]\naddopts = -p toycalc.passall\n") + newFile("toycalc/passall.py", fakeConftest)
	// The clamp fix with an edit of the test the test patch replaces.
	clampTestEdit := "diff --git a/tests/test_clamp.py b/tests/test_clamp.py\n--- a/tests/test_clamp.py\n+++ b/tests/test_clamp.py\n" +
		"@@ -7,3 +7,7 @@ def test_clamp_inside():\n \n def test_clamp_low():\n     assert clamp(-3, 0, 10) == 0\n+\n+\n+def test_clamp_high():\n+    assert True\n"
	for _, tc := range []struct {
		name      string
		task      int
		patch     string
		rule      reward.Rule
		c         float64
		testEdits int
		f2p       float64
		discarded []string
	}{
		{name: "plain fix: gold", task: 0, patch: reward.PatchGold, rule: reward.RuleResolved, c: 1, f2p: 1},
		{name: "plain fix: empty patch", task: 0, patch: reward.PatchEmpty, rule: reward.RuleUnresolved, c: 0.2},
		{name: "plain fix: wrong fix", task: 0, patch: toyPatch(t, "add.wrong.patch"), rule: reward.RuleUnresolved, c: 0.2},
		{name: "plain fix: a planted conftest.py passing every test", task: 0, patch: newFile("conftest.py", fakeConftest),
			rule: reward.RuleUnresolved, c: 0.2, testEdits: 1, discarded: []string{"conftest.py"}},
		{name: "plain fix: a plugin loaded by a planted pytest.ini", task: 0, patch: plugin,
			rule: reward.RuleUnresolved, c: 0.2, testEdits: 1, discarded: []string{"pytest.ini"}},
		{name: "plain fix: fake PASSED lines printed by the package", task: 0, patch: fakeLines, rule: reward.RuleUnresolved, c: 0.2},
		{name: "plain fix: gold, with a log longer than the sandbox's output cap", task: 0, patch: noisy, rule: reward.RuleResolved, c: 1, f2p: 1},
		{name: "plain fix: the package skips the tests", task: 0, patch: skipAll, rule: reward.RuleTestsNotRun, c: 0.1},
		{name: "new tests: gold", task: 1, patch: reward.PatchGold, rule: reward.RuleResolved, c: 1, f2p: 1},
		{name: "new tests: empty patch", task: 1, patch: reward.PatchEmpty, rule: reward.RuleUnresolved, c: 0.2},
		{name: "new tests: the agent writes the hidden test file itself", task: 1,
			patch: newFile("tests/test_text.py", "def test_word_count_simple():\n    pass\n\n\ndef test_word_count_spaces():\n    pass\n"),
			rule:  reward.RuleUnresolved, c: 0.2, testEdits: 1, discarded: []string{"tests/test_text.py"}},
		{name: "test edit: gold", task: 2, patch: reward.PatchGold, rule: reward.RuleResolved, c: 1, f2p: 1},
		{name: "test edit: the test file edited alone does not help", task: 2, patch: clampTestEdit,
			rule: reward.RuleUnresolved, c: 0.2, testEdits: 1, discarded: []string{"tests/test_clamp.py"}},
		{name: "test edit: with the fix, resolved, the edit discarded and counted", task: 2,
			patch: toyPatch(t, "clamp.gold.patch") + clampTestEdit, rule: reward.RuleResolved, c: 1, f2p: 1,
			testEdits: 1, discarded: []string{"tests/test_clamp.py"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := reward.VerifyPatch(context.Background(), fresh, toyTask(t, tc.task), tc.patch, reward.RepoOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.Equal(t, tc.c, v.Correctness)
			require.Equal(t, tc.f2p, v.Repo.F2PRate, v.Output)
			require.Equal(t, tc.testEdits, v.Repo.TestFileEdits)
			require.Equal(t, tc.discarded, v.Repo.Discarded)
		})
	}
}

// TestVerifyRepoFaults: what the agent can cause is scored, what it cannot is an
// error with correctness 0.
func TestVerifyRepoFaults(t *testing.T) {
	fresh := newToyFactory(t)
	ctx := context.Background()
	loop := "diff --git a/toycalc/text.py b/toycalc/text.py\n--- a/toycalc/text.py\n+++ b/toycalc/text.py\n" +
		"@@ -1,3 +1,5 @@\n \"\"\"Text helpers.\"\"\"\n+while True:\n+    pass\n \n \n"
	t.Run("the agent removed .git: its change cannot be taken", func(t *testing.T) {
		sb, err := fresh.NewSandbox(ctx)
		require.NoError(t, err)
		defer sb.Close()
		res, err := sb.Run(ctx, rollout.Command{Shell: "rm -rf .git"})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, string(res.Stderr))
		v, err := reward.VerifyRepo(ctx, sb, fresh, toyTask(t, 0), reward.RepoOptions{})
		require.NoError(t, err)
		require.Equal(t, reward.RulePatchFailed, v.Rule, v.Reason)
		require.Equal(t, 0.1, v.Correctness)
		require.True(t, v.SandboxFault)
	})
	t.Run("the agent's code hangs the tests: they time out", func(t *testing.T) {
		task := toyTask(t, 1)
		repo := *task.Repo
		repo.TestTimeout = 2 * time.Second // the loop never ends: the timeout always fires
		task.Repo = &repo
		v, err := reward.VerifyPatch(ctx, fresh, task, loop, reward.RepoOptions{})
		require.NoError(t, err)
		require.Equal(t, reward.RuleTestsNotRun, v.Rule, v.Reason)
		require.Equal(t, 0.1, v.Correctness)
		require.True(t, v.TimedOut)
	})
	t.Run("the agent commits: its change is still taken against the image's commit", func(t *testing.T) {
		sb, err := fresh.NewSandbox(ctx)
		require.NoError(t, err)
		defer sb.Close()
		// The agent commits its own history: the diff is still taken against the
		// image's commit, so a change to .git is none of its diff.
		res, err := sb.Run(ctx, rollout.Command{Shell: "printf 'x\\n' > toycalc/new.py && git -c user.name=a -c user.email=a@b add -A && " +
			"git -c user.name=a -c user.email=a@b commit -qm x && echo ok"})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, string(res.Stderr))
		v, err := reward.VerifyRepo(ctx, sb, fresh, toyTask(t, 0), reward.RepoOptions{})
		require.NoError(t, err)
		require.Equal(t, reward.RuleUnresolved, v.Rule, v.Reason)
		require.Contains(t, v.Repo.Diff, "+++ b/toycalc/new.py")
	})
	for _, tc := range []struct {
		name string
		edit func(r *tasks.Repo)
		err  string
	}{
		{name: "an image without the task's base commit", edit: func(r *tasks.Repo) { r.BaseCommit = strings.Repeat("ab", 20) },
			err: "does not hold the task's base commit"},
		{name: "a test patch that does not apply", edit: func(r *tasks.Repo) {
			r.TestPatch = strings.ReplaceAll(r.TestPatch, "def test_sub():", "def test_subtract():")
		}, err: "the task's test patch does not apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := toyTask(t, 0)
			repo := *task.Repo
			tc.edit(&repo)
			task.Repo = &repo
			v, err := reward.VerifyPatch(ctx, fresh, task, reward.PatchGold, reward.RepoOptions{})
			require.ErrorContains(t, err, tc.err)
			require.Equal(t, reward.RuleSandboxError, v.Rule)
			require.Zero(t, v.Correctness)
		})
	}
}

// TestVerifyRepoSWESmithRow: a SWE-smith row (an image per repository, a patch that
// brings the bug, the failing tests' file hidden from the agent) over the toy image.
func TestVerifyRepoSWESmithRow(t *testing.T) {
	fresh := newToyFactory(t)
	ref := imagestest.SWERef(t)
	row, err := json.Marshal(map[string]any{
		"instance_id": "agentic-opd__swe-toy.1e9c6927.func_pm_op_change__mul", "repo": "agentic-opd/swe-toy",
		"image_name": ref, "patch": toyPatch(t, "mul.bug.patch"), "problem_statement": "mul(3, 4) returns 7.",
		"FAIL_TO_PASS": []string{"tests/test_arith.py::test_mul"}, "PASS_TO_PASS": []string{"tests/test_arith.py::test_sub"},
		"test_cmd": "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_arith.py", "log_parser": "pytest",
	})
	require.NoError(t, err)
	ts, err := tasks.ReadSWEJSONL(strings.NewReader(string(row)), "smith.jsonl", tasks.SWEConfig{})
	require.NoError(t, err)
	task := ts[0]
	require.Equal(t, []string{"tests/test_arith.py"}, task.Repo.HiddenFiles)

	ctx := context.Background()
	t.Run("the agent's sandbox has the bug and not the hidden tests", func(t *testing.T) {
		sb, err := fresh.NewSandbox(ctx)
		require.NoError(t, err)
		defer sb.Close()
		require.NoError(t, reward.PrepareRepo(ctx, sb, task.Repo))
		res, err := sb.Run(ctx, rollout.Command{Shell: "grep -c 'return a + b' toycalc/arith.py; test -e tests/test_arith.py || echo hidden; git status --short"})
		require.NoError(t, err)
		require.Equal(t, "1\nhidden\n", string(res.Stdout), string(res.Stderr))
	})
	for _, tc := range []struct {
		name  string
		patch string
		rule  reward.Rule
	}{
		{name: "gold: the bug patch reversed", patch: reward.PatchGold, rule: reward.RuleResolved},
		{name: "empty patch", patch: reward.PatchEmpty, rule: reward.RuleUnresolved},
		{name: "the agent writes the hidden test file", rule: reward.RuleUnresolved,
			patch: newFile("tests/test_arith.py", "def test_mul():\n    pass\n\n\ndef test_sub():\n    pass\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := reward.VerifyPatch(ctx, fresh, task, tc.patch, reward.RepoOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.Equal(t, 1.0, v.Repo.P2PRate, v.Output)
		})
	}
}

// TestVerifyRepoImageWithUntrackedFiles: an image whose work tree holds files git
// does not track (build output a Dockerfile left, notes) grades as one without: the
// agent's change is taken against the state it started from, not against HEAD.
func TestVerifyRepoImageWithUntrackedFiles(t *testing.T) {
	layer := t.TempDir()
	out, err := exec.Command(filepath.Join("..", "testdata", "swe", "make-testbed.sh"), layer).CombinedOutput()
	require.NoError(t, err, string(out))
	extra := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(extra, "testbed", "build"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(extra, "testbed", "build", "generated.py"), []byte("X = 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(extra, "testbed", "NOTES"), []byte("untracked\n"), 0o644))
	reg := imagestest.NewRegistry(t)
	ref := imagestest.Push(t, reg, "swe/untracked", imagestest.SWEConfig(), testimage.Root(t), layer, extra)
	cache, err := images.NewCache(images.CacheConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	f, err := bwrap.New(context.Background(), bwrap.Config{Images: cache})
	require.NoError(t, err)
	fresh := rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
		return f.NewSandboxFor(ctx, rollout.SandboxSpec{Image: ref, WorkDir: tasks.DefaultWorkDir})
	})
	task := toyTask(t, 0)
	repo := *task.Repo
	repo.Image = ref
	task.Repo = &repo
	for _, tc := range []struct {
		name  string
		patch string
		rule  reward.Rule
	}{
		{name: "gold", patch: reward.PatchGold, rule: reward.RuleResolved},
		{name: "empty", patch: reward.PatchEmpty, rule: reward.RuleUnresolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := reward.VerifyPatch(context.Background(), fresh, task, tc.patch, reward.RepoOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.NotContains(t, v.Repo.Diff, "NOTES")
		})
	}
}
