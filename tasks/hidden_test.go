package tasks_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// hardCoded returns a solution that answers the calls of the visible tests with the
// reference solution's answers, looked up by their arguments, and None otherwise: what
// a policy that copies the expected values from the prompt writes.
func hardCoded(t *testing.T, task tasks.Task, name string) string {
	t.Helper()
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
	code, out := runTests(t, "", gen)
	require.Equal(t, 0, code, out)
	return out
}

// TestBuiltinHiddenTests is the golden check of the hidden tests: every assertion holds
// for the reference solution, there are at least five of them, and they fail the
// plausible wrong solutions, a solution without the function and a solution that
// hard-codes the visible answers (which passes the visible tests).
func TestBuiltinHiddenTests(t *testing.T) {
	asserts := regexp.MustCompile(`(?m)^\s*assert `)
	for _, task := range tasks.Builtin() {
		t.Run(task.ID, func(t *testing.T) {
			t.Parallel()
			name := strings.TrimPrefix(strings.SplitN(task.TestCode, "\n", 2)[0], "from solution import ")
			require.True(t, strings.HasPrefix(task.HiddenTests, "from solution import "+name+"\n"), task.HiddenTests)
			require.GreaterOrEqual(t, len(asserts.FindAllString(task.HiddenTests, -1)), 5)
			require.NotContains(t, tasks.UserPrompt(task), task.HiddenTests[len("from solution import "+name+"\n"):],
				"the prompt never shows the hidden tests")

			code, out := runTests(t, task.ReferenceSolution, task.HiddenTests)
			require.Equal(t, 0, code, "the reference solution fails a hidden test:\n%s", out)
			require.Empty(t, out)

			code, out = runTests(t, wrongSolutions[task.ID], task.TestCode+task.HiddenTests)
			require.NotEqual(t, 0, code, out)
			code, out = runTests(t, "def unrelated():\n    pass\n", task.HiddenTests)
			require.NotEqual(t, 0, code, out)

			fake := hardCoded(t, task, name)
			code, out = runTests(t, fake, task.TestCode)
			require.Equal(t, 0, code, "the hard-coded solution passes the visible tests:\n%s\n%s", fake, out)
			code, out = runTests(t, fake, task.HiddenTests)
			require.NotEqual(t, 0, code, "the hidden tests catch a hard-coded solution:\n%s\n%s", fake, out)
		})
	}
}
