package reward_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// totalTask has test code that only reaches the 0.8 row (exit 0, no "passed") and
// input/output cases: a program that passes the tests and prints wrong answers
// must not score 0.8.
var totalTask = tasks.Task{ID: "total",
	TestCode: "from solution import total\nassert total([1, 2]) == 3\n",
	Cases: []tasks.Case{
		{Input: "3\n1 2 3\n", Output: "6\n"},
		{Input: "2\n10 -3\n", Output: "7\n"},
	}}

const totalProgram = `import sys

def total(xs):
    return sum(xs)

if __name__ == "__main__":
    data = sys.stdin.read().split()
    print(%s)
`

func TestVerifyCasesAlwaysRun(t *testing.T) {
	passing := totalTask
	passing.TestCode += "print('All tests passed!')\n"
	failing := totalTask
	failing.TestCode += "assert total([]) == 1\n"
	tests := []struct {
		name     string
		task     tasks.Task
		solution string
		rule     reward.Rule
		c        float64
		passed   int
	}{
		{name: "tests at 0.8, wrong program", task: totalTask, solution: fmt.Sprintf(totalProgram, "6"),
			rule: reward.RuleWrongOutput, c: 0.2, passed: 1},
		{name: "tests at 0.8, crashing program", task: totalTask, solution: fmt.Sprintf(totalProgram, "1 / 0"),
			rule: reward.RuleFailed, c: 0.1},
		{name: "tests passed, wrong program", task: passing, solution: fmt.Sprintf(totalProgram, "int(data[1])"),
			rule: reward.RuleWrongOutput, c: 0.2},
		{name: "tests at 0.8, right program", task: totalTask, solution: fmt.Sprintf(totalProgram, "total(map(int, data[1:]))"),
			rule: reward.RuleExitZero, c: 0.8, passed: 2},
		{name: "tests failed, right program", task: failing, solution: fmt.Sprintf(totalProgram, "total(map(int, data[1:]))"),
			rule: reward.RuleAssertion, c: 0.2, passed: 2},
		{name: "both pass", task: passing, solution: fmt.Sprintf(totalProgram, "total(map(int, data[1:]))"),
			rule: reward.RulePassed, c: 1, passed: 2},
	}
	forEachFactory(t, func(t *testing.T, f rollout.SandboxFactory) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				v := verifyWork(t, f, tc.task, agentWork{"solution.py": tc.solution})
				require.Equal(t, tc.rule, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, v.SolutionOutput)
				require.Equal(t, tc.c, v.Correctness)
				require.Equal(t, 2, v.Cases, "the cases ran")
				require.Equal(t, tc.passed, v.CasesPassed)
				require.Greater(t, v.Calls, 0, "the tests ran")
				require.Contains(t, v.Reason, "tests: ")
				require.Contains(t, v.Reason, "; cases: ")
			})
		}
	})
}

// bigOutput is n lines of numbers, about n×8 bytes.
func bigOutput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", i*7919)
	}
	return b.String()
}

const bigProgram = "import sys\nn = int(sys.stdin.read())\nsys.stdout.write(''.join('%d\\n' % (i * 7919) for i in range(n)))\n"

// longInput is the sum task's input for the numbers 0 to n-1, about 8n bytes.
func longInput(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", n)
	for i := range n {
		fmt.Fprintf(&b, "%d ", i)
	}
	return b.String()
}

// manyCases are 500 cases of the sum task.
func manyCases() []tasks.Case {
	cases := make([]tasks.Case, 500)
	for i := range cases {
		cases[i] = tasks.Case{Input: fmt.Sprintf("2\n%d %d\n", i, 3*i), Output: fmt.Sprintf("%d\n", 4*i)}
	}
	return cases
}

func TestVerifyCorrectProgramsPass(t *testing.T) {
	const sum = "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:1 + int(data[0])])))\n"
	big := tasks.Task{ID: "big", Cases: []tasks.Case{
		{Input: "10000", Output: bigOutput(10000)},     // 80 KiB
		{Input: "2000000", Output: bigOutput(2000000)}, // 17 MiB
	}}
	tests := []struct {
		name     string
		task     tasks.Task
		solution string
		opts     reward.VerifyOptions
		rule     reward.Rule
		// bwrapOnly runs a long case in the library's sandbox alone (the host's
		// Python starts slower than the sandbox's, and the point is the budget).
		bwrapOnly bool
	}{
		{name: "stdout over 64 KiB, up to 17 MiB", task: big, solution: bigProgram, rule: reward.RulePassed},
		{name: "stdout over 64 KiB, wrong only at its end", task: big, rule: reward.RuleWrongOutput,
			solution: bigProgram + "if n > 10000:\n    print(1)\n"},
		{name: "stdout over 64 KiB, cut short", task: big, rule: reward.RuleWrongOutput,
			solution: "import sys\nn = int(sys.stdin.read())\nsys.stdout.write(''.join('%d\\n' % (i * 7919) for i in range(n - 1)))\n"},
		{name: "8 MiB on stdin", task: tasks.Task{ID: "long", Cases: []tasks.Case{{Input: longInput(1 << 20), Output: fmt.Sprint(1<<20*((1<<20)-1)/2, "\n")}}},
			solution: sum, rule: reward.RulePassed},
		{name: "20 MiB on stderr", task: sumTask, rule: reward.RulePassed,
			solution: "import sys\nfor _ in range(20):\n    sys.stderr.write('debug ' * 174763)\n" + sum},
		{name: "20 MiB on stderr, wrong answer", task: sumTask, rule: reward.RuleWrongOutput,
			solution: "import sys\nfor _ in range(20):\n    sys.stderr.write('debug ' * 174763)\nprint(6)\n"},
		{name: "20 MiB on stderr while the tests call", rule: reward.RulePassed,
			task:     tasks.Task{ID: "loud", TestCode: "from solution import f\nfor i in range(4):\n    assert f(i) == i\nprint('passed')\n"},
			solution: "import sys\ndef f(i):\n    for _ in range(5):\n        sys.stderr.write('debug ' * 174763)\n    print('x' * 100)\n    return i\n"},
		// The budget of the cases grows with their number: 500 cases do not fit in a
		// Timeout of 2 s, but in 2 s + 500×CaseBudget.
		{name: "500 cases", task: tasks.Task{ID: "many", Cases: manyCases()}, solution: sum,
			opts: reward.VerifyOptions{Timeout: 2 * time.Second}, rule: reward.RulePassed, bwrapOnly: true},
		{name: "an exception with attributes", rule: reward.RulePassed, task: tasks.Task{ID: "bank", TestCode: `from solution import withdraw, InsufficientFunds
try:
    withdraw(10, 15)
except InsufficientFunds as e:
    assert e.shortfall == 5, e.shortfall
    assert e.account == {"id": 7, "tags": ["a"]}
    assert e.needed == 15 and e.code == "NSF"
    assert str(e) == "short by 5"
else:
    raise AssertionError("no InsufficientFunds")
try:
    withdraw(1, 2, strict=False)
except ValueError as e:
    assert e.shortfall == 1 and e.args == ("short",)
print("All tests passed!")
`}, solution: `class BankError(ValueError):
    __slots__ = ("code",)

class InsufficientFunds(BankError):
    def __init__(self, shortfall):
        super().__init__("short by %d" % shortfall)
        self.shortfall = shortfall
        self.account = {"id": 7, "tags": ["a"]}
        self.code = "NSF"

    @property
    def needed(self):
        return self.shortfall + 10

def withdraw(balance, amount, strict=True):
    if amount > balance:
        if strict:
            raise InsufficientFunds(amount - balance)
        e = ValueError("short")
        e.shortfall = amount - balance
        raise e
    return balance - amount
`},
		{name: "arguments nested deeper than 100", rule: reward.RulePassed, task: tasks.Task{ID: "deep", TestCode: fmt.Sprintf(`from solution import depth, chain_length
def nest(n):
    x = []
    for _ in range(n):
        x = [x]
    return x
assert depth(nest(150)) == 151
assert depth(nest(%d)) == %d
node = None
for i in range(400):
    node = (i, node)
assert chain_length(node) == 400
print("All tests passed!")
`, reward.MaxDepth-1, reward.MaxDepth)}, solution: `def depth(x):
    n = 0
    while isinstance(x, list):
        x, n = (x[0] if x else None), n + 1
    return n

def chain_length(node):
    return 0 if node is None else 1 + chain_length(node[1])
`},
	}
	forEachFactory(t, func(t *testing.T, f rollout.SandboxFactory) {
		for _, tc := range tests {
			if _, dir := f.(dirFactory); dir && tc.bwrapOnly {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				v := verifyWorkWith(t, f, tc.task, agentWork{"solution.py": tc.solution}, tc.opts)
				require.Equal(t, tc.rule, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, capString(v.SolutionOutput))
				if tc.rule == reward.RulePassed {
					require.Equal(t, 1.0, v.Correctness)
					require.Equal(t, len(tc.task.Cases), v.CasesPassed)
				}
			})
		}
	})
}

func capString(s string) string {
	if len(s) > 2000 {
		return s[:1000] + "…" + s[len(s)-1000:]
	}
	return s
}

func TestVerifyCaseOutputCap(t *testing.T) {
	f := dirFactory{t}
	// A program that never stops writing is stopped at MaxCaseOutput, however long its
	// 32 MB take on a loaded machine (verifyWork gives it the test binary's time).
	v := verifyWork(t, f, sumTask, agentWork{"solution.py": "import sys\nprint(6)\nwhile True:\n    sys.stdout.write(' ' * 65536)\n"})
	require.Equal(t, reward.RuleWrongOutput, v.Rule, v.Reason)
	require.Contains(t, v.Reason, "(reward.MaxCaseOutput)")
	// A task that expects more cannot be verified.
	_, err := reward.Verify(t.Context(), newDirSandbox(t), f, tasks.Task{ID: "huge", Cases: []tasks.Case{
		{Output: strings.Repeat("x", reward.MaxCaseOutput+1)}}}, reward.VerifyOptions{})
	require.ErrorContains(t, err, "reward.MaxCaseOutput")
}

func TestVerifyMessageLimit(t *testing.T) {
	// A reply {"id":3,"ok":["s","xx…"]} and a request
	// {"args":[["s","xx…"]],"kwargs":[],"id":3,"op":"call","h":1} of exactly the
	// size asked for: the third request (import, getattr, call) to the first handle.
	reply := func(size int) int { return size - len(`{"id":3,"ok":["s",""]}`) }
	request := func(size int) int { return size - len(`{"args":[["s",""]],"kwargs":[],"id":3,"op":"call","h":1}`) }
	tests := []struct {
		name, tests string
		rule        reward.Rule
		reason      string
	}{
		{name: "a reply of MaxMessage bytes", rule: reward.RulePassed,
			tests: fmt.Sprintf("from solution import make\nassert len(make(%d)) == %[1]d\nprint('passed')\n", reply(reward.MaxMessage))},
		{name: "a reply of MaxMessage+1 bytes", rule: reward.RuleSolutionFault, reason: "16777216 bytes (reward.MaxMessage)",
			tests: fmt.Sprintf("from solution import make\nassert len(make(%d)) == %[1]d\nprint('passed')\n", reply(reward.MaxMessage+1))},
		{name: "a request of MaxMessage bytes", rule: reward.RulePassed,
			tests: fmt.Sprintf("from solution import size\nassert size('x' * %d) == %[1]d\nprint('passed')\n", request(reward.MaxMessage))},
		{name: "a request of MaxMessage+1 bytes", rule: reward.RuleAssertion, // "assert" and OverflowError in the output
			reason: "over the message limit of 16777216 bytes (reward.MaxMessage)",
			tests:  fmt.Sprintf("from solution import size\nassert size('x' * %d) == %[1]d\nprint('passed')\n", request(reward.MaxMessage+1))},
	}
	forEachFactory(t, func(t *testing.T, f rollout.SandboxFactory) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				v := verifyWork(t, f, tasks.Task{ID: "limit", TestCode: tc.tests},
					agentWork{"solution.py": "def make(n):\n    return 'x' * n\ndef size(s):\n    return len(s)\n"})
				require.Equal(t, tc.rule, v.Rule, "%s\n%s", v.Reason, v.Output)
				require.Contains(t, v.Reason, tc.reason)
			})
		}
	})
}

// FuzzStreamedOutput checks that the streamed comparison of a case's output agrees
// with SameOutput, wherever the stream's pieces start.
func FuzzStreamedOutput(f *testing.F) {
	for _, s := range [][2]string{{"1  \r\n2\t\n\n\n", "1\n2"}, {"a\r\rb", "a\r\rb"}, {"a \nb", "a\nb "}, {"\n\nx", "x"}, {"x \t", "x"}, {"", "\n"}, {"a \nb", "a  b"}, {"a\n\n", "a\n\nb"}, {"a\r\nb \n", "a\nb"}} {
		f.Add(s[0], s[1], 1)
	}
	f.Fuzz(func(t *testing.T, got, want string, piece int) {
		if piece < 1 {
			piece = 1
		}
		require.Equal(t, reward.SameOutput(got, want), reward.StreamSameOutput(got, want, piece), "%q %q", got, want)
		require.True(t, reward.StreamSameOutput(want, want, piece), "%q", want)
	})
}

func TestVerifyCaseLeavesAChildRunning(t *testing.T) {
	// A correct program that leaves a child running (which holds its stderr) passes,
	// and in time: the child is the sandbox's to end. (Bubblewrap only: the test-only
	// dirSandbox waits for every holder of a command's stderr, as exec.Cmd does.)
	v := verifyWorkWith(t, bwrapSandboxes(t), sumTask, agentWork{"solution.py": "import subprocess, sys\n" +
		"subprocess.Popen(['/bin/sh', '-c', 'sleep 30'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n" +
		"data = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\n"}, reward.VerifyOptions{CaseTimeout: 20 * time.Second})
	require.Equal(t, reward.RulePassed, v.Rule, "%s\n%s", v.Reason, v.Output)
}
