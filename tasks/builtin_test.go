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

// referenceCases are the test cases of the original environment's built-in tasks, call
// and expected value, as its test scripts assert them with ==.
var referenceCases = map[string][]string{
	"fizzbuzz": {
		"fizzbuzz(15) == ['1', '2', 'Fizz', '4', 'Buzz', 'Fizz', '7', '8', 'Fizz', 'Buzz', '11', 'Fizz', '13', '14', 'FizzBuzz']",
		"fizzbuzz(1) == ['1']",
		"fizzbuzz(0) == []",
	},
	"is_palindrome": {
		"is_palindrome('A man, a plan, a canal: Panama') == True",
		"is_palindrome('race a car') == False",
		"is_palindrome('') == True",
		"is_palindrome('Was it a car or a cat I saw?') == True",
	},
	"two_sum": {
		"two_sum([2, 7, 11, 15], 9) == [0, 1]",
		"two_sum([3, 2, 4], 6) == [1, 2]",
		"two_sum([3, 3], 6) == [0, 1]",
	},
	"flatten": {
		"flatten([1, [2, [3, 4], 5]]) == [1, 2, 3, 4, 5]",
		"flatten([]) == []",
		"flatten([1, 2, 3]) == [1, 2, 3]",
		"flatten([[[[1]]]]) == [1]",
		"flatten([1, [2], [[3]], [[[4]]]]) == [1, 2, 3, 4]",
	},
	"longest_common_prefix": {
		"longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'",
		"longest_common_prefix(['dog', 'racecar', 'car']) == ''",
		"longest_common_prefix(['interspecies', 'interstellar', 'interstate']) == 'inters'",
		"longest_common_prefix(['a']) == 'a'",
		"longest_common_prefix([]) == ''",
	},
	"group_anagrams": {
		// result = group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat', 'bat']), each group
		// sorted, then the list of groups sorted.
		"result == [['ate', 'eat', 'tea'], ['bat'], ['nat', 'tan']]",
		"group_anagrams([]) == []",
		"group_anagrams(['a']) == [['a']]",
	},
	"valid_parentheses": {
		"valid_parentheses('()') == True",
		"valid_parentheses('()[]{}') == True",
		"valid_parentheses('(]') == False",
		"valid_parentheses('([)]') == False",
		"valid_parentheses('{[]}') == True",
		"valid_parentheses('') == True",
	},
	"merge_intervals": {
		"merge_intervals([[1, 3], [2, 6], [8, 10], [15, 18]]) == [[1, 6], [8, 10], [15, 18]]",
		"merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]",
		"merge_intervals([[1, 4], [0, 4]]) == [[0, 4]]",
		"merge_intervals([]) == []",
		"merge_intervals([[1, 2]]) == [[1, 2]]",
	},
}

func TestBuiltinTestCasesAreTheReferences(t *testing.T) {
	for _, task := range tasks.Builtin() {
		t.Run(task.ID, func(t *testing.T) {
			var asserts []string
			for _, line := range strings.Split(task.TestCode, "\n") {
				if rest, ok := strings.CutPrefix(line, "assert "); ok {
					asserts = append(asserts, rest)
				}
			}
			if diff := cmp.Diff(referenceCases[task.ID], asserts); diff != "" {
				t.Errorf("asserted cases (-want +got):\n%s", diff)
			}
		})
	}
	group := tasks.Builtin()[5]
	require.Equal(t, "group_anagrams", group.ID)
	require.Contains(t, group.TestCode, "result = group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat', 'bat'])\n"+
		"result = sorted(sorted(group) for group in result)\n")
}
