package reward_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
)

// initPatch is a diff that adds lines after the docstring of toycalc/__init__.py.
func initPatch(lines ...string) string {
	var b strings.Builder
	b.WriteString("diff --git a/toycalc/__init__.py b/toycalc/__init__.py\n--- a/toycalc/__init__.py\n+++ b/toycalc/__init__.py\n")
	b.WriteString("@@ -1,3 +1," + itoa(3+len(lines)) + " @@\n")
	b.WriteString(" \"\"\"toycalc: a small package with known bugs, the repository of agenticopd's SWE-style test tasks.\"\"\"\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString(" \n from toycalc.arith import add, clamp, mul, sub\n")
	return b.String()
}

// TestVerifyRepoLogOverWindow: grading reads at most the last 8 MiB of the test log, so
// a fix's code that pushes pytest's report out of that window with padding, prints
// pytest's lines for the hidden tests and ends the process with status 0 would be
// graded by its own lines alone. A log over the window is not parsed.
func TestVerifyRepoLogOverWindow(t *testing.T) {
	fresh := newToyFactory(t)
	// _forge writes 9 MiB of padding, then pytest's lines for the task's tests, to the
	// test log, and ends the process with status 0. At import, pytest captures file
	// descriptors 1 and 2: the log is then the regular file it saved a copy of.
	forge := []string{
		"import os, stat, sys",
		"def _log():",
		"    for fd in range(3, 64):",
		"        try:",
		"            if stat.S_ISREG(os.fstat(fd).st_mode) and not os.readlink('/proc/self/fd/%d' % fd).endswith('(deleted)'):",
		"                return fd",
		"        except OSError:",
		"            pass",
		"    return 1",
		"def _forge(fd, pad):",
		"    sys.stdout.flush()",
		"    for _ in range(pad):",
		"        os.write(fd, (('x' * 1023 + '\\n') * 1024).encode())",
		"    os.write(fd, b'PASSED tests/test_arith.py::test_add\\nPASSED tests/test_arith.py::test_mul\\nPASSED tests/test_arith.py::test_sub\\n')",
		"    os._exit(0)",
	}
	for _, tc := range []struct {
		name  string
		patch string
		rule  reward.Rule
		c     float64
	}{
		// pytest runs and reports test_add FAILED; as the process exits, the padding
		// pushes that line out of the window and the forged lines are the last ones.
		{name: "padding and forged lines after pytest's report", rule: reward.RuleLogTooLong, c: 0.1,
			patch: initPatch(slices.Concat(forge, []string{"import atexit", "atexit.register(_forge, 1, 9)"})...)},
		// The same at import: pytest never reports at all.
		{name: "padding and forged lines at import", rule: reward.RuleLogTooLong, c: 0.1,
			patch: initPatch(slices.Concat(forge, []string{"_forge(_log(), 9)"})...)},
		// Without the padding pytest's FAILED line stays in the log: its worst status
		// counts.
		{name: "forged lines after pytest's report, no padding", rule: reward.RuleUnresolved, c: 0.2,
			patch: initPatch(slices.Concat(forge, []string{"import atexit", "atexit.register(_forge, 1, 0)"})...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := reward.VerifyPatch(context.Background(), fresh, toyTask(t, 0), tc.patch, reward.RepoOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.rule, v.Rule, "%s\n…%s", v.Reason, v.Output[max(0, len(v.Output)-2000):])
			require.Equal(t, tc.c, v.Correctness, v.Reason)
			require.False(t, v.Repo.Resolved)
			if tc.rule == reward.RuleLogTooLong {
				require.Contains(t, v.Reason, "over the")
			}
		})
	}
}
