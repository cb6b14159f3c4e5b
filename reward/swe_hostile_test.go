package reward_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// agentRun prepares a fresh sandbox of fresh for task, runs script there as the
// agent's last command, and grades it; check runs in the agent's sandbox afterwards.
func agentRun(t *testing.T, fresh rollout.SandboxFactory, task tasks.Task, files map[string]string, script string,
	opts reward.RepoOptions, check func(sb rollout.Sandbox)) reward.Verification {
	t.Helper()
	ctx := context.Background()
	sb, err := fresh.NewSandbox(ctx)
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, reward.PrepareRepo(ctx, sb, task.Repo))
	for name, data := range files {
		require.NoError(t, sb.WriteFile(name, []byte(data)))
	}
	res, err := sb.Run(ctx, rollout.Command{Shell: "set -e\n" + script, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "the agent's script: %s", res.Stderr)
	v, err := reward.VerifyRepo(ctx, sb, fresh, task, opts)
	require.NoError(t, err)
	if check != nil {
		check(sb)
	}
	return v
}

// passedLines is a module that prints PASSED lines for every test of the toy task
// "add" and ends the process with status 0.
const passedLines = "import os\nprint('PASSED tests/test_arith.py::test_add')\nprint('PASSED tests/test_arith.py::test_mul')\n" +
	"print('PASSED tests/test_arith.py::test_sub', flush=True)\nos._exit(0)\n"

// goldFix is the toy task "add"'s fix, as an agent makes it.
const goldFix = "sed -i '0,/return a - b/s//return a + b/' toycalc/arith.py\n"

// TestVerifyRepoHostileAgentStates grades what an agent leaves in its sandbox to
// take part in its own grading: git configuration, attributes, filters and the
// processes they start, an index lock, ignore rules, modules named as the test
// runner, pytest's sections of setup.cfg and pyproject.toml. None of it may resolve a
// task the agent did not fix, nor keep a fix from resolving it.
func TestVerifyRepoHostileAgentStates(t *testing.T) {
	fresh := newToyFactory(t)
	task := toyTask(t, 0)
	gold := toyPatch(t, "add.gold.patch")
	plugin := "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n" +
		"    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = \"passed\"\n"
	for _, tc := range []struct {
		name      string
		files     map[string]string
		script    string
		opts      reward.RepoOptions
		rule      reward.Rule
		c         float64
		discarded []string
		check     func(t *testing.T, sb rollout.Sandbox)
	}{
		{
			// The filter runs on "git add" and starts a process that puts the gold
			// patch where the diff is written.
			name: "a clean filter of the agent's git configuration swaps the diff",
			files: map[string]string{
				".git/gold.patch": gold,
				".git/swap.sh": "#!/bin/sh\ntouch /testbed/.git/filter-ran\n" +
					"(setsid sh -c 'while :; do cp /testbed/.git/gold.patch /testbed/.git/agenticopd-agent.diff.tmp 2>/dev/null && " +
					"mv /testbed/.git/agenticopd-agent.diff.tmp /testbed/.git/agenticopd-agent.diff; done' </dev/null >/dev/null 2>&1 &)\ncat\n",
				".gitattributes": "* filter=swap\n",
			},
			script: "chmod +x .git/swap.sh\nprintf '[filter \"swap\"]\\n\\tclean = /testbed/.git/swap.sh\\n\\tsmudge = cat\\n\\trequired = true\\n' >>.git/config\n" +
				"printf '[core]\\n\\tfsmonitor = /testbed/.git/swap.sh\\n\\thooksPath = /testbed/.git\\n' >>.git/config\n",
			rule: reward.RuleUnresolved, c: 0.2, discarded: []string{".gitattributes"},
			check: func(t *testing.T, sb rollout.Sandbox) {
				_, err := sb.ReadFile(".git/filter-ran")
				require.ErrorIs(t, err, os.ErrNotExist, "the agent's filter ran while the diff was taken")
			},
		},
		{
			name:   "a diff over MaxDiff is the agent's fault",
			script: goldFix + "head -c 3000000 /dev/urandom >blob.bin\n",
			opts:   reward.RepoOptions{MaxDiff: 1 << 20},
			rule:   reward.RulePatchFailed, c: 0.1,
		},
		{
			name:   "a leftover index.lock does not stop a fix",
			script: goldFix + "touch .git/index.lock\n",
			rule:   reward.RuleResolved, c: 1,
		},
		{
			name: "the agent's own index, HEAD and refs are not what the diff is taken from",
			script: goldFix + "git -c user.name=a -c user.email=a@b commit -qam mine\n" +
				"printf 'garbage' >.git/index\n",
			rule: reward.RuleResolved, c: 1,
		},
		{
			// The start blob in the agent's object store says another text: the diff
			// is taken against it, and git apply refuses it against the real one.
			name: "a diff git apply refuses is the agent's fault",
			files: map[string]string{".git/tamper.py": "import os, subprocess, zlib\n" +
				"h = subprocess.check_output(['git', 'rev-parse', 'HEAD:toycalc/arith.py']).decode().strip()\n" +
				"p = '.git/objects/%s/%s' % (h[:2], h[2:])\nos.chmod(p, 0o644)\ndata = b'something else\\n'\n" +
				"open(p, 'wb').write(zlib.compress(b'blob %d\\x00' % len(data) + data))\n"},
			script: "python3 .git/tamper.py\n" + goldFix,
			rule:   reward.RulePatchFailed, c: 0.1,
		},
		{
			name: "a new file under an ignored path reaches grading",
			files: map[string]string{
				"toycalc/build/__init__.py": "def plus(a, b):\n    return a + b\n",
			},
			script: "printf 'build/\\n' >>.gitignore\n" +
				"sed -i '0,/    return a - b/s//    from toycalc.build import plus\\n    return plus(a, b)/' toycalc/arith.py\n",
			rule: reward.RuleResolved, c: 1,
		},
		{
			name:   "attributes cannot make the tests' restore fail",
			files:  map[string]string{".gitattributes": "tests/*.py working-tree-encoding=UTF-16LE\n*.py text eol=crlf\n"},
			script: goldFix,
			rule:   reward.RuleResolved, c: 1, discarded: []string{".gitattributes"},
		},
		{
			name:   "pytest's section of setup.cfg loads the agent's plugin",
			files:  map[string]string{"toycalc/passall.py": plugin},
			script: "printf '[metadata]\\nname = toycalc\\n\\n[tool:pytest]\\ntestpaths = tests\\naddopts = -p toycalc.passall\\n' >setup.cfg\n",
			rule:   reward.RuleUnresolved, c: 0.2, discarded: []string{"setup.cfg"},
		},
		{
			name: "pytest's table of a new pyproject.toml loads the agent's plugin",
			files: map[string]string{
				"toycalc/passall.py": plugin,
				"pyproject.toml":     "[project]\nname = \"toycalc\"\n\n[tool.pytest.ini_options]\naddopts = \"-p toycalc.passall\"\n",
			},
			rule: reward.RuleUnresolved, c: 0.2, discarded: []string{"pyproject.toml"},
		},
		{
			// importlib.metadata matches ".dist-info" whatever its case: the
			// entry point would load the agent's plugin.
			name: "packaging metadata whose suffix is in capitals registers a plugin",
			files: map[string]string{
				"zzagent.DIST-INFO/METADATA":         "Metadata-Version: 2.1\nName: zzagent\nVersion: 1.0\n",
				"zzagent.DIST-INFO/entry_points.txt": "[pytest11]\nzzagent = zzagentplug\n",
				"zz2.EGG-INFO/PKG-INFO":              "Metadata-Version: 1.1\nName: zz2\nVersion: 1.0\n",
				"zz2.EGG-INFO/entry_points.txt":      "[pytest11]\nzz2 = zzagentplug\n",
				"zzagentplug.py":                     plugin,
			},
			rule: reward.RuleUnresolved, c: 0.2, discarded: []string{"zzagent.DIST-INFO/entry_points.txt", "zz2.EGG-INFO/entry_points.txt"},
		},
		{
			// Put back through the link, the start's pytest section would be
			// written into the grading sandbox's .git/config.
			name:   "setup.cfg as a link to the repository's .git/config",
			script: "rm setup.cfg\nln -s .git/config setup.cfg\n",
			rule:   reward.RuleUnresolved, c: 0.2, discarded: []string{"setup.cfg"},
		},
		{
			name:   "the fix, and setup.cfg as a link to .git/HEAD",
			script: goldFix + "rm setup.cfg\nln -s .git/HEAD setup.cfg\n",
			rule:   reward.RuleResolved, c: 1, discarded: []string{"setup.cfg"},
		},
		{
			// pytest imports a package's __init__.py files while it collects.
			name: "a new __init__.py at the top registers a plugin",
			files: map[string]string{"__init__.py": "import gc, pytest\nfrom _pytest.config import Config\n" +
				"class _P:\n    @pytest.hookimpl(hookwrapper=True)\n    def pytest_runtest_makereport(self, item, call):\n" +
				"        outcome = yield\n        outcome.get_result().outcome = 'passed'\n" +
				"for o in gc.get_objects():\n    if isinstance(o, Config):\n        o.pluginmanager.register(_P(), 'zz')\n        break\n"},
			rule: reward.RuleUnresolved, c: 0.2, discarded: []string{"__init__.py"},
		},
		{
			name:   "the fix, and a pyproject.toml whose pytest table is cut out, the rest kept",
			files:  map[string]string{"pyproject.toml": "[project]\nname = \"toycalc\"\n\n[tool.pytest.ini_options]\naddopts = \"-x\"\n"},
			script: goldFix,
			rule:   reward.RuleResolved, c: 1, discarded: []string{"pyproject.toml"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := agentRun(t, fresh, task, tc.files, tc.script, tc.opts, func(sb rollout.Sandbox) {
				if tc.check != nil {
					tc.check(t, sb)
				}
			})
			require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
			require.Equal(t, tc.c, v.Correctness)
			for _, d := range tc.discarded {
				require.Contains(t, v.Repo.Discarded, d)
			}
		})
	}
}

// shadowModules are the modules the test command imports that an agent could put in
// the repository in place of the image's: the test runner (as a module and as a
// package), its own package, its dependencies, and the standard library.
var shadowModules = []struct {
	name  string
	files map[string]string
}{
	{"pytest.py", map[string]string{"pytest.py": passedLines}},
	{"pytest/", map[string]string{"pytest/__init__.py": passedLines, "pytest/__main__.py": ""}},
	{"_pytest/", map[string]string{"_pytest/__init__.py": passedLines}},
	{"pluggy.py", map[string]string{"pluggy.py": passedLines}},
	{"iniconfig.py", map[string]string{"iniconfig.py": passedLines}},
	{"argparse.py", map[string]string{"argparse.py": passedLines}},
	{"a module in a directory pytest puts on sys.path", map[string]string{"toycalc/extra/json.py": passedLines, "toycalc/extra/README": "x\n"}},
}

// TestVerifyRepoRunnerCannotBeShadowed: python -m pytest puts the working directory
// first on sys.path, so a module the agent adds there under the name of one the test
// run imports would run in its place. Each is left out, and the task is not resolved.
func TestVerifyRepoRunnerCannotBeShadowed(t *testing.T) {
	t.Run("Python 3.11, pytest 7", func(t *testing.T) { testShadowing(t, newToyFactory(t)) })
	t.Run("Python 3.9, pytest 6", func(t *testing.T) {
		testShadowing(t, toyFactoryFor(t, imagestest.SWEOldPythonRef(t)))
	})
}

func testShadowing(t *testing.T, fresh rollout.SandboxFactory) {
	task := toyTask(t, 0)
	for _, m := range shadowModules {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			v := agentRun(t, fresh, task, m.files, "", reward.RepoOptions{}, nil)
			require.LessOrEqual(t, v.Correctness, 0.2, "%s: %s\n%s", v.Rule, v.Reason, v.Output)
			require.NotEmpty(t, v.Repo.Discarded, "nothing discarded")
			for f := range m.files {
				if strings.HasSuffix(f, ".py") {
					require.Contains(t, v.Repo.Discarded, f)
				}
			}
		})
	}
	t.Run("the same names inside the repository's package are kept", func(t *testing.T) {
		t.Parallel()
		v := agentRun(t, fresh, task, map[string]string{"toycalc/argparse.py": "X = 1\n"}, goldFix, reward.RepoOptions{}, nil)
		require.Equal(t, reward.RuleResolved, v.Rule, "%s\n%s", v.Reason, v.Output)
		require.Empty(t, v.Repo.Discarded)
		require.Contains(t, v.Repo.Diff, "toycalc/argparse.py")
	})
}

// TestPrepareRepoRefusesABaseCommitThatIsNotHEAD: a row whose base commit is in the
// image's clone but not checked out would be graded against another tree.
func TestPrepareRepoRefusesABaseCommitThatIsNotHEAD(t *testing.T) {
	f := dirFactory{t}
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	dir := sb.(*dirSandbox).dir
	gitIn := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b",
			"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.py"), []byte("x = 1\n"), 0o644))
	gitIn("add", "-A")
	gitIn("commit", "-qm", "one")
	first := gitIn("rev-parse", "HEAD")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.py"), []byte("x = 2\n"), 0o644))
	gitIn("commit", "-qam", "two")
	head := gitIn("rev-parse", "HEAD")

	err = reward.PrepareRepo(context.Background(), sb, &tasks.Repo{BaseCommit: first, Image: "toy"})
	require.Error(t, err)
	require.Contains(t, err.Error(), first)
	require.Contains(t, err.Error(), head)
	err = reward.PrepareRepo(context.Background(), sb, &tasks.Repo{BaseCommit: "0123456789abcdef0123456789abcdef01234567", Image: "toy"})
	require.ErrorContains(t, err, "does not hold the task's base commit")
	require.NoError(t, reward.PrepareRepo(context.Background(), sb, &tasks.Repo{BaseCommit: head[:12], Image: "toy"}))
	fmt.Fprint(os.Stderr)
}

// TestVerifyRepoTestPatchDirectoryHeldByTheAgent: a test patch that creates a file in
// a new directory; the agent puts a file, or a link, at that directory's path. The
// tests' restore must not fail (a broken task would fail the group), nor write
// through the link.
func TestVerifyRepoTestPatchDirectoryHeldByTheAgent(t *testing.T) {
	fresh := newToyFactory(t)
	task := toyTask(t, 0)
	repo := *task.Repo
	repo.TestPatch += newFile("toycalc/fixtures/data.txt", "x\n")
	task.Repo = &repo
	for _, script := range []string{"", "echo x >toycalc/fixtures\n", "ln -s .. toycalc/fixtures\n"} {
		t.Run(fmt.Sprintf("%q", script), func(t *testing.T) {
			t.Parallel()
			v := agentRun(t, fresh, task, nil, goldFix+script, reward.RepoOptions{}, nil)
			require.Equal(t, reward.RuleResolved, v.Rule, "%s\n%s", v.Reason, v.Output)
			if script != "" {
				require.Contains(t, v.Repo.Discarded, "toycalc/fixtures")
			}
		})
	}
}
