package tasks_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

const python = "/usr/bin/python3"

// wrongSolutions are plausible but wrong solutions, one per built-in task.
var wrongSolutions = map[string]string{
	"fizzbuzz": `def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        if i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out
`,
	"is_palindrome":         "def is_palindrome(s):\n    return s == s[::-1]\n",
	"two_sum":               "def two_sum(nums, target):\n    for i in range(len(nums)):\n        for j in range(len(nums)):\n            if i != j and nums[i] + nums[j] == target:\n                return [j, i]\n",
	"flatten":               "def flatten(lst):\n    out = []\n    for x in lst:\n        out.extend(x if isinstance(x, list) else [x])\n    return out\n",
	"longest_common_prefix": "def longest_common_prefix(strs):\n    return strs[0] if strs else ''\n",
	"group_anagrams":        "def group_anagrams(strs):\n    g = {}\n    for s in strs:\n        g.setdefault(len(s), []).append(s)\n    return list(g.values())\n",
	"valid_parentheses":     "def valid_parentheses(s):\n    return len(s) % 2 == 0\n",
	"merge_intervals":       "def merge_intervals(intervals):\n    out = []\n    for a, b in intervals:\n        if out and a <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], b)\n        else:\n            out.append([a, b])\n    return out\n",
}

// runTests writes solution.py and the test file to a temporary directory and runs the
// tests with python3.
func runTests(t *testing.T, solution, tests string) (exitCode int, output string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "solution.py"), []byte(solution), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test_solution.py"), []byte(tests), 0o644))
	cmd := exec.Command(python, "-B", "test_solution.py")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "running python3")
		return ee.ExitCode(), out.String()
	}
	return 0, out.String()
}

func TestBuiltinTasks(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("these tests run the built-in tests with %s: %v", python, err)
	}
	signatures := map[string]string{
		"fizzbuzz":              "fizzbuzz(n)",
		"is_palindrome":         "is_palindrome(s)",
		"two_sum":               "two_sum(nums, target)",
		"flatten":               "flatten(lst)",
		"longest_common_prefix": "longest_common_prefix(strs)",
		"group_anagrams":        "group_anagrams(strs)",
		"valid_parentheses":     "valid_parentheses(s)",
		"merge_intervals":       "merge_intervals(intervals)",
	}
	difficulties := map[string]string{
		"fizzbuzz": "easy", "is_palindrome": "easy", "two_sum": "easy", "flatten": "medium",
		"longest_common_prefix": "easy", "group_anagrams": "medium", "valid_parentheses": "easy",
		"merge_intervals": "medium",
	}
	all := tasks.Builtin()
	var ids []string
	for _, task := range all {
		ids = append(ids, task.ID)
	}
	wantIDs := []string{"fizzbuzz", "is_palindrome", "two_sum", "flatten", "longest_common_prefix",
		"group_anagrams", "valid_parentheses", "merge_intervals"}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Fatalf("built-in ids (-want +got):\n%s", diff)
	}
	for _, task := range all {
		t.Run(task.ID, func(t *testing.T) {
			sig := signatures[task.ID]
			name := sig[:strings.IndexByte(sig, '(')]
			require.Equal(t, difficulties[task.ID], task.Difficulty)
			require.Equal(t, tasks.LanguagePython, task.Language)
			require.Contains(t, task.Statement, "`"+sig+"`")
			require.True(t, strings.HasPrefix(task.TestCode, "from solution import "+name+"\n"), "tests import from solution:\n%s", task.TestCode)
			require.True(t, strings.HasSuffix(task.TestCode, "print(\"All tests passed!\")\n"))

			// The reference solution has the reference's signature…
			code, out := runTests(t, task.ReferenceSolution,
				"import inspect\nfrom solution import "+name+"\nprint('"+name+"' + str(inspect.signature("+name+")))\n")
			require.Equal(t, 0, code, out)
			require.Equal(t, sig+"\n", out)

			// …and passes the tests.
			code, out = runTests(t, task.ReferenceSolution, task.TestCode)
			require.Equal(t, 0, code, out)
			require.Equal(t, "All tests passed!\n", out)

			// A plausible wrong solution fails an assertion.
			code, out = runTests(t, wrongSolutions[task.ID], task.TestCode)
			require.NotEqual(t, 0, code, out)
			require.Contains(t, out, "AssertionError")
			require.NotContains(t, out, "passed")

			// No solution at all fails too.
			code, out = runTests(t, "", task.TestCode)
			require.NotEqual(t, 0, code, out)
			require.Contains(t, out, "ImportError")
		})
	}
}

func TestBuiltinReturnsACopy(t *testing.T) {
	a := tasks.Builtin()
	a[0].Statement = "changed"
	b := tasks.Builtin()
	require.NotEqual(t, "changed", b[0].Statement)
}
