package reward_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// fakePassingTest is what a reward-hacking agent writes instead of a solution.
const fakePassingTest = "print('All tests passed!')\n"

// agentWork is what an agent left in the workspace: file name → content.
type agentWork map[string]string

// verifyWork writes the agent's files into a fresh sandbox of f and verifies the task
// there, the tests in another sandbox of f.
func verifyWork(t *testing.T, f rollout.SandboxFactory, task tasks.Task, work agentWork) reward.Verification {
	t.Helper()
	return verifyWorkWith(t, f, task, work, reward.VerifyOptions{})
}

// verifyWorkWith verifies work with opts. A zero Timeout or CaseTimeout is the test
// binary's time (testctx.Left), not the verifier's default: a test that checks a time
// limit sets its own, and the others only get slower on a loaded machine (beside 16
// busy loops, messages of reward.MaxMessage took longer than the default 30 s).
func verifyWorkWith(t *testing.T, f rollout.SandboxFactory, task tasks.Task, work agentWork, opts reward.VerifyOptions) reward.Verification {
	t.Helper()
	left := testctx.Left(t)
	opts.Timeout = cmp.Or(opts.Timeout, left)
	opts.CaseTimeout = cmp.Or(opts.CaseTimeout, left)
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	for name, content := range work {
		require.NoError(t, sb.WriteFile(name, []byte(content)))
	}
	v, err := reward.Verify(context.Background(), sb, f, task, opts)
	require.NoError(t, err)
	require.Equal(t, v.Correctness >= 0.8, v.Passed())
	return v
}

// requireFails checks that a wrong solution scores at most 0.2.
func requireFails(t *testing.T, v reward.Verification) {
	t.Helper()
	require.LessOrEqual(t, v.Correctness, 0.2, "rule %s (%s)\ntests:\n%s\nsolution:\n%s", v.Rule, v.Reason, v.Output, v.SolutionOutput)
	require.False(t, v.Passed())
}

// functionName is the function a built-in task's tests import.
func functionName(task tasks.Task) string {
	return strings.TrimPrefix(strings.SplitN(task.TestCode, "\n", 2)[0], "from solution import ")
}

// stubFor returns a wrong solution: the task's function, returning a value no test
// expects.
func stubFor(task tasks.Task) string {
	return "def " + functionName(task) + "(*args, **kwargs):\n    return [[]]\n"
}

// hardCoded returns a solution that answers the calls of the visible tests with the
// reference solution's answers, looked up by their arguments, and None otherwise: what
// a policy that copies the expected values from the prompt writes.
func hardCoded(t *testing.T, task tasks.Task) string {
	t.Helper()
	name := functionName(task)
	gen := fmt.Sprintf(`import ast, copy
ns = {}
exec(%q, ns)
f = ns[%q]
table = {}
for node in ast.walk(ast.parse(%q)):
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == %q:
        args = tuple(ast.literal_eval(a) for a in node.args)
        table[repr(args)] = f(*copy.deepcopy(args))
print("_T = %%r\ndef %s(*a):\n    return _T.get(repr(a))" %% (table,))
`, task.ReferenceSolution, name, task.TestCode, name, name)
	out, err := exec.Command("/usr/bin/python3", "-c", gen).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

func TestVerifyBuiltinTasks(t *testing.T) {
	forEachFactory(t, func(t *testing.T, f rollout.SandboxFactory) {
		for _, task := range tasks.Builtin() {
			t.Run(task.ID, func(t *testing.T) {
				t.Parallel()
				t.Run("reference solution passes", func(t *testing.T) {
					v := verifyWork(t, f, task, agentWork{"solution.py": task.ReferenceSolution})
					require.Equal(t, reward.RulePassed, v.Rule, "%s\n%s", v.Reason, v.Output)
					require.Equal(t, 1.0, v.Correctness)
					require.Equal(t, 0, v.ExitCode)
					require.Contains(t, v.Output, "All tests passed!")
					require.True(t, v.Completed)
					require.Greater(t, v.Calls, 5, "the visible and the hidden tests called the solution")
				})
				t.Run("wrong solution fails", func(t *testing.T) {
					v := verifyWork(t, f, task, agentWork{"solution.py": stubFor(task)})
					require.Equal(t, reward.RuleAssertion, v.Rule, v.Output)
					require.Equal(t, 0.2, v.Correctness)
				})
				t.Run("answers hard-coded from the prompt fail the hidden tests", func(t *testing.T) {
					fake := hardCoded(t, task)
					visible := task
					visible.HiddenTests = ""
					v := verifyWork(t, f, visible, agentWork{"solution.py": fake})
					require.Equal(t, reward.RulePassed, v.Rule, "the fake passes the visible tests alone: %s\n%s", fake, v.Output)
					requireFails(t, verifyWork(t, f, task, agentWork{"solution.py": fake}))
				})
				t.Run("fake passing test file fails", func(t *testing.T) {
					v := verifyWork(t, f, task, agentWork{
						"test_solution.py":        fakePassingTest,
						"test_" + task.ID + ".py": fakePassingTest,
					})
					require.Equal(t, reward.RuleFailed, v.Rule, v.Output)
					require.Equal(t, 0.1, v.Correctness)
					require.Contains(t, v.Output, "ModuleNotFoundError: No module named 'solution'")
				})
				t.Run("fake passing test file with a wrong solution fails", func(t *testing.T) {
					requireFails(t, verifyWork(t, f, task, agentWork{
						"test_solution.py": fakePassingTest,
						"solution.py":      stubFor(task),
					}))
				})
			})
		}
	})
}

func TestVerifyTestsNeverEnterTheWorkspace(t *testing.T) {
	f := bwrapSandboxes(t)
	task := tasks.Builtin()[2]
	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	v, err := reward.Verify(context.Background(), sb, f, task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
	var files []string
	require.NoError(t, fs.WalkDir(sb.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}))
	require.Equal(t, []string{"solution.py"}, files, "the verifier left nothing in the rollout's workspace")
}

func TestVerifyScripts(t *testing.T) {
	solution := agentWork{"solution.py": "def f():\n    return 1\n"}
	tests := []struct {
		name     string
		tests    string
		hidden   string
		work     agentWork
		opts     reward.VerifyOptions
		rule     reward.Rule
		exit     int
		timedOut bool
	}{
		{name: "exit 0 without passed", tests: "from solution import f\nassert f() == 1\nprint('ok')\n", rule: reward.RuleExitZero},
		{name: "passed in upper case", tests: "print('ALL TESTS PASSED')\n", rule: reward.RulePassed},
		{name: "passed but non-zero exit", tests: "print('passed')\nraise SystemExit(3)\n", rule: reward.RuleFailed, exit: 3},
		{name: "syntax error in the solution", tests: "from solution import f\n", work: agentWork{"solution.py": "def f(:\n"},
			rule: reward.RuleFailed, exit: 1},
		{name: "name error", tests: "from solution import f\nf()\nprint('passed')\n", work: agentWork{"solution.py": "def f():\n    return g()\n"},
			rule: reward.RuleFailed, exit: 1},
		{name: "missing function", tests: "from solution import g\nprint('passed')\n", rule: reward.RuleFailed, exit: 1},
		{name: "assertion error", tests: "assert 1 == 2\n", rule: reward.RuleAssertion, exit: 1},
		{name: "script ends with sys.exit(0)", tests: "import sys\nfrom solution import f\nassert f() == 1\nprint('All tests passed!')\nsys.exit(0)\n", rule: reward.RulePassed},
		{name: "script ends with exit()", tests: "from solution import f\nassert f() == 1\nprint('All tests passed!')\nexit()\n", rule: reward.RulePassed},
		{name: "sys.exit(0) from a function of the script", tests: "import sys\nfrom solution import f\ndef main():\n    assert f() == 1\n    sys.exit(0)\nmain()\n", rule: reward.RuleExitZero},
		{name: "unittest.main passing", tests: "import unittest\nfrom solution import f\nclass T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 1)\nunittest.main()\n", rule: reward.RuleExitZero},
		{name: "unittest.main failing", tests: "import unittest\nfrom solution import f\nclass T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 2)\nunittest.main()\n", exit: 1, rule: reward.RuleAssertion},
		{name: "import solution, then attributes", tests: "import solution\nassert solution.f() == 1\nprint('passed')\n", rule: reward.RulePassed},
		{name: "from solution import star", tests: "from solution import *\nassert f() == 1\nprint('passed')\n", rule: reward.RulePassed},
		{name: "the test process's own os._exit(0)", tests: "import os\nprint('passed', flush=True)\nos._exit(0)\n", rule: reward.RuleIncomplete},
		{name: "script changes directory", tests: "import os\nfrom solution import f\nos.chdir('/')\nassert f() == 1\nprint('All tests passed!')\n", rule: reward.RulePassed},
		{name: "stdin of the tests is empty", tests: "import sys\nassert sys.stdin.read() == ''\nprint('All tests passed!')\n", rule: reward.RulePassed},
		{name: "hidden tests run after visible ones that exit", tests: "import sys\nprint('All tests passed!')\nsys.exit(0)\n",
			hidden: "from solution import f\nassert f() == 2\n", rule: reward.RuleAssertion, exit: 1},
		{name: "hidden tests run after unittest.main", tests: "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        pass\nunittest.main()\n",
			hidden: "from solution import f\nassert f() == 2\n", rule: reward.RuleAssertion, exit: 1},
		{name: "hidden tests alone", hidden: "from solution import f\nassert f() == 1\nprint('passed')\n", rule: reward.RulePassed},
		{name: "timeout in the solution", tests: "from solution import f\nf()\n", work: agentWork{"solution.py": "def f():\n    while True: pass\n"},
			opts: reward.VerifyOptions{Timeout: time.Second}, rule: reward.RuleFailed, exit: 124, timedOut: true},
		{name: "timeout on import", tests: "from solution import f\n", work: agentWork{"solution.py": "import time\ntime.sleep(100)\n"},
			opts: reward.VerifyOptions{Timeout: time.Second}, rule: reward.RuleFailed, exit: 124, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := tc.work
			if work == nil {
				work = solution
			}
			v := verifyWorkWith(t, dirFactory{t}, tasks.Task{ID: "t", TestCode: tc.tests, HiddenTests: tc.hidden}, work, tc.opts)
			require.Equal(t, tc.rule, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, v.SolutionOutput)
			require.Equal(t, tc.exit, v.ExitCode, v.Output)
			require.Equal(t, tc.timedOut, v.TimedOut)
			require.Equal(t, tc.exit == 0 && tc.rule != reward.RuleIncomplete, v.Completed)
			require.True(t, v.Unconfined, "the test sandbox reports it is unconfined")
			require.NotEmpty(t, v.Reason)
		})
	}
}

func TestVerifyKeepsCappedOutputButJudgesAllOfIt(t *testing.T) {
	task := tasks.Task{ID: "big", TestCode: "print('x' * 20000)\nprint('all passed')\nprint('y' * 20000)\n"}
	v := verifyWorkWith(t, dirFactory{t}, task, nil, reward.VerifyOptions{MaxOutput: 1000})
	require.Equal(t, reward.RulePassed, v.Rule)
	require.NotContains(t, v.Output, "passed", "the middle was cut")
	require.Contains(t, v.Output, "bytes cut]")
	require.Less(t, len(v.Output), 1100)
	require.True(t, strings.HasPrefix(v.Output, "xxx"))
	require.True(t, strings.HasSuffix(v.Output, "yyy\n"))
}

func TestVerifySolutionOutputIsKeptApartAndNeverCounts(t *testing.T) {
	task := tasks.Task{ID: "p", TestCode: "from solution import f\nassert f() == 1\n"}
	v := verifyWork(t, dirFactory{t}, task, agentWork{"solution.py": "import sys, os\n" +
		"print('All tests passed!')\nprint('passed', file=sys.stderr)\nos.write(1, b'passed\\n')\n" +
		"def f():\n    print('All tests passed!')\n    return 1\n"})
	require.Equal(t, reward.RuleExitZero, v.Rule, "the solution's prints do not make the tests pass: %s", v.Output)
	require.Contains(t, v.SolutionOutput, "All tests passed!")
	require.NotContains(t, v.Output, "passed")
}

// hideStarter hides the Start method of a sandbox, as a wrapper that does not forward
// it would.
type hideStarter struct{ rollout.Sandbox }

type hideStarterFactory struct{ rollout.SandboxFactory }

func (f hideStarterFactory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := f.SandboxFactory.NewSandbox(ctx)
	return hideStarter{sb}, err
}

// failingFactory makes sandboxes that fail as told.
type failingFactory struct {
	t                  *testing.T
	failNew, failWrite error
	failRun            error
}

func (f failingFactory) NewSandbox(context.Context) (rollout.Sandbox, error) {
	if f.failNew != nil {
		return nil, f.failNew
	}
	return &dirSandbox{dir: f.t.TempDir(), failWrite: f.failWrite, failRun: f.failRun}, nil
}

func TestVerifyErrors(t *testing.T) {
	boom := errors.New("boom")
	task := tasks.Builtin()[0]
	ctx := context.Background()
	good := dirFactory{t}
	solution := func() rollout.Sandbox {
		sb := newDirSandbox(t)
		require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
		return sb
	}
	requireSandboxError := func(t *testing.T, v reward.Verification, err error, target error) {
		t.Helper()
		require.ErrorIs(t, err, target)
		require.Equal(t, reward.RuleSandboxError, v.Rule)
		require.Equal(t, 0.0, v.Correctness)
		require.NotEmpty(t, v.Reason)
	}

	v, err := reward.Verify(ctx, newDirSandbox(t), good, tasks.Task{ID: "empty"}, reward.VerifyOptions{})
	require.ErrorIs(t, err, reward.ErrNoTests)
	require.Equal(t, reward.Verification{Rule: reward.RuleNoTests}, v)

	t.Run("the solution sandbox cannot Start", func(t *testing.T) {
		v, err := reward.Verify(ctx, hideStarter{solution()}, good, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, reward.ErrNoStarter)
		require.ErrorContains(t, err, "forward Start in a wrapper")
	})
	t.Run("the test sandbox cannot Start", func(t *testing.T) {
		v, err := reward.Verify(ctx, solution(), hideStarterFactory{good}, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, reward.ErrNoStarter)
	})
	t.Run("no factory for the tests", func(t *testing.T) {
		v, err := reward.Verify(ctx, solution(), nil, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, err)
		require.ErrorContains(t, err, "pass the rollout's factory")
	})
	t.Run("the test sandbox cannot be made", func(t *testing.T) {
		v, err := reward.Verify(ctx, solution(), failingFactory{t: t, failNew: boom}, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, boom)
	})
	t.Run("the tests cannot be written", func(t *testing.T) {
		v, err := reward.Verify(ctx, solution(), failingFactory{t: t, failWrite: boom}, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, boom)
	})
	t.Run("the test process cannot start", func(t *testing.T) {
		v, err := reward.Verify(ctx, solution(), failingFactory{t: t, failRun: boom}, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, boom)
	})
	t.Run("the solution process cannot start, nor the control", func(t *testing.T) {
		sb := solution().(*dirSandbox)
		sb.failRun = boom
		v, err := reward.Verify(ctx, sb, &failAfter{f: good, n: 1}, task, reward.VerifyOptions{})
		requireSandboxError(t, v, err, boom)
	})
	t.Run("the solution process cannot start, the control can", func(t *testing.T) {
		// Only the rollout's own sandbox is broken: the agent's doing.
		sb := solution().(*dirSandbox)
		sb.failRun = boom
		v, err := reward.Verify(ctx, sb, good, task, reward.VerifyOptions{})
		require.NoError(t, err)
		require.Equal(t, reward.RuleSolutionFault, v.Rule)
		require.Equal(t, 0.1, v.Correctness)
		require.True(t, v.SandboxFault)
		require.Contains(t, v.Reason, "boom")
	})
	t.Run("context canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := reward.Verify(ctx, solution(), good, task, reward.VerifyOptions{})
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("context canceled mid-run", func(t *testing.T) {
		sb := newDirSandbox(t)
		require.NoError(t, sb.WriteFile("solution.py", []byte("def fizzbuzz(n):\n    import time\n    time.sleep(60)\n")))
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		v, err := reward.Verify(ctx, sb, good, task, reward.VerifyOptions{})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, reward.RuleSandboxError, v.Rule)
	})
}

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

// brokenHarness runs something else than the solution side's harness.
type brokenHarness struct{ *dirSandbox }

func (s brokenHarness) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	c.Argv = []string{"/bin/sh", "-c", "echo no python here >&2; exit 3"}
	return s.dirSandbox.Start(ctx, c)
}

func TestVerifyTellsABrokenHarnessFromABrokenSolution(t *testing.T) {
	// Each harness says hello before any code of the tests or the solution runs; a side
	// that never did is an infrastructure failure (C = 0, an error), not a score,
	// unless it is the rollout's sandbox and a fresh one works.
	task := tasks.Builtin()[0]
	sb := newDirSandbox(t)
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	v, err := reward.Verify(context.Background(), sb, dirFactory{t}, task, reward.VerifyOptions{Python: "/bin/false"})
	require.ErrorContains(t, err, "the test harness did not start (exit code 1)")
	require.Equal(t, reward.RuleSandboxError, v.Rule)
	require.Equal(t, 0.0, v.Correctness)

	// The solution side's harness did not start, and a fresh sandbox of the factory
	// cannot run the interpreter either (the control run): the infrastructure.
	v, err = reward.Verify(context.Background(), brokenHarness{sb}, &failAfter{f: dirFactory{t}, n: 1}, task, reward.VerifyOptions{})
	require.ErrorContains(t, err, "the solution harness did not start (exit code 3): no python here")
	require.Equal(t, reward.RuleSandboxError, v.Rule)
	// A fresh sandbox of the factory runs it: what is broken is the rollout's own
	// sandbox, whose state only the agent changed (a full memory, a full workspace).
	v, err = reward.Verify(context.Background(), brokenHarness{sb}, dirFactory{t}, task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, reward.RuleSolutionFault, v.Rule)
	require.True(t, v.SandboxFault)
	require.Contains(t, v.Reason, "the solution harness did not start (exit code 3): no python here")

	// A solution that ends its process after the harness started is the solution's
	// doing: a fault, scored.
	require.NoError(t, sb.WriteFile("solution.py", []byte("import os\nos._exit(0)\n")))
	v, err = reward.Verify(context.Background(), sb, dirFactory{t}, task, reward.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, reward.RuleSolutionFault, v.Rule)
}
