package reward_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// fakePassingTest is what a reward-hacking agent writes instead of a solution.
const fakePassingTest = "print('All tests passed!')\n"

// agentWork is what an agent left in the workspace: file name → content.
type agentWork map[string]string

// verifyWork writes the agent's files into a fresh sandbox and verifies the task there.
func verifyWork(t *testing.T, newSandbox func(t *testing.T) rollout.Sandbox, task tasks.Task, work agentWork) reward.Verification {
	t.Helper()
	sb := newSandbox(t)
	for name, content := range work {
		require.NoError(t, sb.WriteFile(name, []byte(content)))
	}
	v, err := reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
	require.NoError(t, err)
	return v
}

func dirSandboxFactory(t *testing.T) rollout.Sandbox { return newDirSandbox(t) }

// stubFor returns a wrong solution: the task's function, returning a value no test
// expects.
func stubFor(task tasks.Task) string {
	name := strings.TrimPrefix(strings.SplitN(task.TestCode, "\n", 2)[0], "from solution import ")
	return "def " + name + "(*args, **kwargs):\n    return [[]]\n"
}

// runBuiltinVerification is the "done when" check of every built-in task, run against
// the given sandbox.
func runBuiltinVerification(t *testing.T, newSandbox func(t *testing.T) rollout.Sandbox) {
	for _, task := range tasks.Builtin() {
		t.Run(task.ID, func(t *testing.T) {
			t.Parallel()
			t.Run("reference solution passes", func(t *testing.T) {
				v := verifyWork(t, newSandbox, task, agentWork{"solution.py": task.ReferenceSolution})
				require.Equal(t, reward.RulePassed, v.Rule, v.Output)
				require.Equal(t, 1.0, v.Correctness)
				require.Equal(t, 0, v.ExitCode)
				require.Contains(t, v.Output, "All tests passed!")
				require.True(t, v.Completed)
				require.True(t, v.Passed())
			})
			t.Run("wrong solution fails", func(t *testing.T) {
				v := verifyWork(t, newSandbox, task, agentWork{"solution.py": stubFor(task)})
				require.Equal(t, reward.RuleAssertion, v.Rule, v.Output)
				require.Equal(t, 0.2, v.Correctness)
				require.False(t, v.Passed())
			})
			t.Run("fake passing test file fails", func(t *testing.T) {
				v := verifyWork(t, newSandbox, task, agentWork{
					"test_solution.py":        fakePassingTest,
					"test_" + task.ID + ".py": fakePassingTest,
				})
				require.Equal(t, reward.RuleFailed, v.Rule, v.Output)
				require.Equal(t, 0.1, v.Correctness)
				require.Contains(t, v.Output, "No module named 'solution'")
			})
			t.Run("fake passing test file with a wrong solution fails", func(t *testing.T) {
				v := verifyWork(t, newSandbox, task, agentWork{
					"test_solution.py": fakePassingTest,
					"solution.py":      stubFor(task),
				})
				require.Equal(t, reward.RuleAssertion, v.Rule, v.Output)
				require.False(t, v.Passed())
			})
		})
	}
}

func TestVerifyBuiltinTasks(t *testing.T) {
	runBuiltinVerification(t, dirSandboxFactory)
}

// runEarlyExitChecks checks that code imported by the tests cannot end the test process
// with status 0 before the tests ran, while test scripts that exit on their own still
// count.
func runEarlyExitChecks(t *testing.T, newSandbox func(t *testing.T) rollout.Sandbox) {
	fizzbuzz := tasks.Builtin()[0]
	hacks := []struct {
		name     string
		solution string
	}{
		{name: "print passed and os._exit(0) on import", solution: "print('All tests passed!', flush=True)\nimport os\nos._exit(0)\n"},
		{name: "print passed and sys.exit(0) on import", solution: "print('All tests passed!')\nimport sys\nsys.exit(0)\n"},
		{name: "sys.exit(0) on import", solution: "import sys\nsys.exit(0)\n"},
		{name: "exit() builtin on import", solution: "print('All tests passed!')\nexit(0)\n"},
		{name: "SystemExit from the function under test", solution: "def fizzbuzz(n):\n    print('All tests passed!')\n    raise SystemExit\n"},
		{name: "unittest.main from the solution", solution: "import unittest\ndef fizzbuzz(n):\n    print('All tests passed!')\n    unittest.main(argv=['x'])\n"},
		{name: "wrong solution forcing status 0 at exit", solution: "import atexit, os\natexit.register(lambda: os._exit(0))\n" + stubFor(fizzbuzz)},
	}
	for _, h := range hacks {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			v := verifyWork(t, newSandbox, fizzbuzz, agentWork{"solution.py": h.solution})
			require.Equal(t, 0, v.ExitCode, v.Output)
			require.False(t, v.Completed)
			require.Equal(t, reward.RuleIncomplete, v.Rule, v.Output)
			require.Equal(t, 0.1, v.Correctness)
			require.False(t, v.Passed())
		})
	}

	legit := []struct {
		name  string
		tests string
		exit  int
		rule  reward.Rule
	}{
		{name: "script ends with sys.exit(0)", tests: "import sys\nfrom solution import f\nassert f() == 1\nprint('All tests passed!')\nsys.exit(0)\n", rule: reward.RulePassed},
		{name: "script ends with exit()", tests: "from solution import f\nassert f() == 1\nprint('All tests passed!')\nexit()\n", rule: reward.RulePassed},
		{name: "sys.exit(0) from a function of the script", tests: "import sys\nfrom solution import f\ndef main():\n    assert f() == 1\n    sys.exit(0)\nmain()\n", rule: reward.RuleExitZero},
		{name: "unittest.main passing", tests: "import unittest\nfrom solution import f\nclass T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 1)\nunittest.main()\n", rule: reward.RuleExitZero},
		{name: "unittest.main failing", tests: "import unittest\nfrom solution import f\nclass T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 2)\nunittest.main()\n", exit: 1, rule: reward.RuleAssertion},
		{name: "script changes directory", tests: "import os\nfrom solution import f\nos.chdir('/')\nassert f() == 1\nprint('All tests passed!')\n", rule: reward.RulePassed},
		{name: "the token is not on the tests' stdin", tests: "import sys\nassert sys.stdin.read() == ''\nprint('All tests passed!')\n", rule: reward.RulePassed},
	}
	for _, tc := range legit {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := verifyWork(t, newSandbox, tasks.Task{ID: "t", TestCode: tc.tests}, agentWork{"solution.py": "def f():\n    return 1\n"})
			require.Equal(t, tc.exit, v.ExitCode, v.Output)
			require.Equal(t, tc.exit == 0, v.Completed, v.Output)
			require.Equal(t, tc.rule, v.Rule, v.Output)
		})
	}
}

func TestVerifyEarlyExitDoesNotPass(t *testing.T) {
	runEarlyExitChecks(t, dirSandboxFactory)
}

func TestVerifyIgnoresAPlantedCompletionFile(t *testing.T) {
	// Whatever the agent wrote under names like the verifier's, the token is fresh.
	task := tasks.Builtin()[0]
	work := agentWork{"solution.py": "import sys\nsys.exit(0)\n"}
	for i := range 4 {
		work[fmt.Sprintf("_verify_%024x.ok", i)] = strings.Repeat("0", 32)
	}
	v := verifyWork(t, dirSandboxFactory, task, work)
	require.Equal(t, reward.RuleIncomplete, v.Rule)
}

func TestVerifyTestFileNameIsFresh(t *testing.T) {
	task := tasks.Builtin()[0]
	sb := newDirSandbox(t)
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	seen := map[string]bool{}
	for range 3 {
		v, err := reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
		require.NoError(t, err)
		require.Regexp(t, `^_verify_[0-9a-f]{24}\.py$`, v.TestFile)
		require.False(t, seen[v.TestFile], "name %s reused", v.TestFile)
		seen[v.TestFile] = true
		data, err := sb.ReadFile(v.TestFile)
		require.NoError(t, err)
		require.Equal(t, task.TestCode, string(data), "the canonical tests are written verbatim")
	}
}

func TestVerifyWorkspaceCannotShadowTheStandardLibrary(t *testing.T) {
	// Without isolated mode, python3 puts the working directory first on the module
	// path, and a planted json.py would decide the result of tests that import json.
	task := tasks.Task{ID: "j", TestCode: "import json\nfrom solution import f\nassert f() == 1\nprint('All tests passed!')\n"}
	hijack := "import sys\nprint('All tests passed!')\nsys.exit(0)\n"
	v := verifyWork(t, dirSandboxFactory, task, agentWork{
		"json.py":          hijack,
		"sitecustomize.py": hijack,
		"solution.py":      "def f():\n    return 2\n",
	})
	require.Equal(t, reward.RuleAssertion, v.Rule, v.Output)

	// A planted unittest.py must not replace the real one for unittest-based tests.
	task = tasks.Task{ID: "u", TestCode: "import unittest\nfrom solution import f\n" +
		"class T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 1)\n" +
		"unittest.main()\n"}
	fake := "import sys\nclass TestCase: pass\ndef main():\n    print('All tests passed!')\n    sys.exit(0)\n"
	v = verifyWork(t, dirSandboxFactory, task, agentWork{
		"unittest.py": fake,
		"solution.py": "def f():\n    return 2\n",
	})
	require.Equal(t, 1, v.ExitCode, v.Output)
	require.Equal(t, reward.RuleAssertion, v.Rule, v.Output)
}

func TestVerifyCorrectnessFromTheRun(t *testing.T) {
	tests := []struct {
		name     string
		tests    string
		solution string
		opts     reward.VerifyOptions
		rule     reward.Rule
		c        float64
		timedOut bool
	}{
		{name: "exit 0 without passed", tests: "from solution import f\nassert f() == 1\nprint('ok')\n",
			solution: "def f():\n    return 1\n", rule: reward.RuleExitZero, c: 0.8},
		{name: "passed in upper case", tests: "print('ALL TESTS PASSED')\n", rule: reward.RulePassed, c: 1},
		{name: "passed but non-zero exit", tests: "print('passed')\nraise SystemExit(3)\n", rule: reward.RuleFailed, c: 0.1},
		{name: "syntax error in the solution", tests: "from solution import f\n", solution: "def f(:\n", rule: reward.RuleFailed, c: 0.1},
		{name: "name error", tests: "from solution import f\nf()\n", solution: "def f():\n    return g()\n", rule: reward.RuleFailed, c: 0.1},
		{name: "assertion error", tests: "assert 1 == 2\n", rule: reward.RuleAssertion, c: 0.2},
		{name: "timeout", tests: "from solution import f\n", solution: "def f(): pass\nwhile True: pass\n",
			opts: reward.VerifyOptions{Timeout: 300 * time.Millisecond}, rule: reward.RuleFailed, c: 0.1, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newDirSandbox(t)
			if tc.solution != "" {
				require.NoError(t, sb.WriteFile("solution.py", []byte(tc.solution)))
			}
			v, err := reward.Verify(context.Background(), sb, tasks.Task{ID: "t", TestCode: tc.tests}, tc.opts)
			require.NoError(t, err)
			require.Equal(t, tc.rule, v.Rule, v.Output)
			require.Equal(t, tc.c, v.Correctness)
			require.Equal(t, tc.timedOut, v.TimedOut)
			require.True(t, v.Unconfined, "the test sandbox reports it is unconfined")
			if tc.timedOut {
				require.Equal(t, 124, v.ExitCode)
			}
		})
	}
}

func TestVerifyKeepsCappedOutputButJudgesAllOfIt(t *testing.T) {
	sb := newDirSandbox(t)
	task := tasks.Task{ID: "big", TestCode: "print('x' * 20000)\nprint('all passed')\nprint('y' * 20000)\n"}
	v, err := reward.Verify(context.Background(), sb, task, reward.VerifyOptions{MaxOutput: 1000})
	require.NoError(t, err)
	require.Equal(t, reward.RulePassed, v.Rule)
	require.NotContains(t, v.Output, "passed", "the middle was cut")
	require.Contains(t, v.Output, "bytes cut]")
	require.Less(t, len(v.Output), 1100)
	require.True(t, strings.HasPrefix(v.Output, "xxx"))
	require.True(t, strings.HasSuffix(v.Output, "yyy\n"))
}

func TestVerifyErrors(t *testing.T) {
	boom := errors.New("boom")
	task := tasks.Builtin()[0]

	v, err := reward.Verify(context.Background(), newDirSandbox(t), tasks.Task{ID: "empty"}, reward.VerifyOptions{})
	require.ErrorIs(t, err, reward.ErrNoTests)
	require.Equal(t, reward.Verification{Rule: reward.RuleNoTests}, v)

	sb := newDirSandbox(t)
	sb.failWrite = boom
	v, err = reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
	require.ErrorIs(t, err, boom)
	require.Equal(t, reward.RuleSandboxError, v.Rule)
	require.Equal(t, 0.0, v.Correctness)

	sb = newDirSandbox(t)
	sb.failRun = boom
	v, err = reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
	require.ErrorIs(t, err, boom)
	require.Equal(t, reward.RuleSandboxError, v.Rule)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = reward.Verify(ctx, newDirSandbox(t), task, reward.VerifyOptions{})
	require.ErrorIs(t, err, context.Canceled)

	// A sandbox that refuses the path (as a confined sandbox would for a bad name).
	_, err = reward.Verify(context.Background(), refusingSandbox{newDirSandbox(t)}, task, reward.VerifyOptions{})
	require.ErrorIs(t, err, fs.ErrPermission)
}

type refusingSandbox struct{ *dirSandbox }

// noStdinSandbox drops Command.Stdin, as a sandbox that ignores it would.
type noStdinSandbox struct{ *dirSandbox }

func (s noStdinSandbox) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	c.Stdin = nil
	return s.dirSandbox.Run(ctx, c)
}

func TestVerifyNeedsTheSandboxToPassStdin(t *testing.T) {
	task := tasks.Builtin()[0]
	sb := noStdinSandbox{newDirSandbox(t)}
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	v, err := reward.Verify(context.Background(), sb, task, reward.VerifyOptions{})
	require.ErrorContains(t, err, "did not pass Command.Stdin")
	require.Equal(t, reward.RuleSandboxError, v.Rule)
	require.Equal(t, 0.0, v.Correctness)
}

func (refusingSandbox) WriteFile(string, []byte) error { return fs.ErrPermission }

func TestCorrectnessTable(t *testing.T) {
	tests := []struct {
		exit int
		out  string
		c    float64
		rule reward.Rule
	}{
		{0, "All tests passed!", 1.0, reward.RulePassed},
		{0, "3 PASSED", 1.0, reward.RulePassed},
		{0, "", 0.8, reward.RuleExitZero},
		{0, "AssertionError", 0.8, reward.RuleExitZero},
		{1, "Traceback …\nAssertionError", 0.2, reward.RuleAssertion},
		{1, "assert failed with an ERROR", 0.2, reward.RuleAssertion},
		{1, "passed", 0.1, reward.RuleFailed},
		{1, "NameError: name 'g' is not defined", 0.1, reward.RuleFailed},
		{1, "assert", 0.1, reward.RuleFailed},
		{124, "", 0.1, reward.RuleFailed},
		{-1, "error", 0.1, reward.RuleFailed},
	}
	for _, tc := range tests {
		c, rule := reward.Correctness(tc.exit, tc.out)
		require.Equal(t, tc.c, c, "exit %d, %q", tc.exit, tc.out)
		require.Equal(t, tc.rule, rule, "exit %d, %q", tc.exit, tc.out)
	}
}
