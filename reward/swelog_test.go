package reward_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/tasks"
)

type st = map[string]reward.TestStatus

const (
	pass = reward.StatusPassed
	fail = reward.StatusFailed
	errd = reward.StatusError
	skip = reward.StatusSkipped
	xf   = reward.StatusXFail
)

func TestParseTestLog(t *testing.T) {
	for _, tc := range []struct {
		name, parser, log string
		want              st
	}{
		{
			name: "pytest -rA summary as pytest 7.2.1 prints it: ids cut at their first space", parser: "pytest",
			log: "============ short test summary info ============\n" +
				"PASSED tests/test_fmt.py::test_param[a b]\n" +
				"SKIPPED [1] tests/test_fmt.py:5: nope\n" +
				"XFAIL tests/test_fmt.py::test_xfail - known\n" +
				"XPASS tests/test_fmt.py::test_xpass known\n" +
				"ERROR tests/test_fmt.py::test_error - RuntimeError: boom\n" +
				"FAILED tests/test_fmt.py::test_param[c-d] - AssertionError: assert 'c-d' != '...\n" +
				"========= 1 failed, 1 passed in 0.01s =========\n",
			want: st{"tests/test_fmt.py::test_param[a": pass, "tests/test_fmt.py::test_xfail": xf,
				"tests/test_fmt.py::test_error": errd, "tests/test_fmt.py::test_param[c-d]": fail},
		},
		{
			name: "pytest_v2: classic verbose lines with colour codes; progress lines are not read", parser: "parse_log_pytest_v2",
			log:  "tests/a.py::test_x \x1b[32mPASSED\x1b[0m\ntests/a.py::test_y SKIPPED (no db) [100%]\n",
			want: st{"tests/a.py::test_x": pass},
		},
		{
			name: "a planted PASSED line does not cover pytest's FAILED", parser: "pytest",
			log:  "PASSED tests/a.py::test_x\nFAILED tests/a.py::test_x - assert 1 == 2\nPASSED tests/a.py::test_x\n",
			want: st{"tests/a.py::test_x": fail},
		},
		{
			name: "django: a docstring names its test, a header its first word", parser: "django",
			log: "test_a (app.tests.T) ... ok\ntest_b (app.tests.T) ... FAIL\ntest_c (app.tests.T) ... skipped 'x'\n" +
				"test_d (app.tests.T)\nDoes d. ... ok\ntest_e (app.tests.T) ... ERROR\nFAIL: test_f (app.tests.T)\n",
			want: st{"test_a (app.tests.T)": pass, "test_b (app.tests.T)": fail, "test_c (app.tests.T)": skip,
				"Does d.": pass, "test_e (app.tests.T)": errd, "test_f": fail},
		},
		{
			name: "sympy: a failure header names path.py:test", parser: "sympy",
			log:  "test_a ok\ntest_b F\ntest_c E\ntest_e f\n____ sympy/core/tests/test_x.py:test_d ____\n",
			want: st{"test_a": pass, "test_b": fail, "test_c": errd, "sympy/core/tests/test_x.py:test_d": fail},
		},
		{
			name: "go test -v", parser: "gotest",
			log:  "=== RUN   TestA\n--- PASS: TestA (0.00s)\n    --- FAIL: TestA/sub (0.01s)\n--- SKIP: TestB (0.00s)\n",
			want: st{"TestA": pass, "TestA/sub": fail, "TestB": skip},
		},
		{
			name: "cargo test: an ignored test is not read", parser: "cargo",
			log:  "test m::a ... ok\ntest m::b ... FAILED\ntest m::c ... ignored\n",
			want: st{"m::a": pass, "m::b": fail},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reward.ParseTestLog(tc.parser, tc.log)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
	_, err := reward.ParseTestLog("cobol", "")
	require.ErrorContains(t, err, `unknown log parser "cobol"`)
}

func TestGradeRepo(t *testing.T) {
	repo := &tasks.Repo{FailToPass: []string{"t.py::f1", "t.py::f2[a-b]"}, PassToPass: []string{"t.py::p1"}}
	for _, tc := range []struct {
		name     string
		statuses st
		exit     int
		rule     reward.Rule
		c        float64
		f2p, p2p float64
		failing  []string
		void     bool
	}{
		{name: "all pass", exit: 0, statuses: st{"t.py::f1": pass, "t.py::f2[a-b]": xf, "t.py::p1": pass},
			rule: reward.RuleResolved, c: 1, f2p: 1, p2p: 1},
		{name: "skipped FAIL_TO_PASS has not passed", exit: 0,
			statuses: st{"t.py::f1": pass, "t.py::f2[a-b]": skip, "t.py::p1": pass},
			rule:     reward.RuleUnresolved, c: 0.2, f2p: 0.5, p2p: 1, failing: []string{"t.py::f2[a-b]"}},
		{name: "missing FAIL_TO_PASS has not passed", exit: 0, statuses: st{"t.py::f1": pass, "t.py::p1": pass},
			rule: reward.RuleUnresolved, c: 0.2, f2p: 0.5, p2p: 1, failing: []string{"t.py::f2[a-b]"}},
		{name: "skipped PASS_TO_PASS is no regression", exit: 0,
			statuses: st{"t.py::f1": pass, "t.py::f2[a-b]": pass, "t.py::p1": skip}, rule: reward.RuleResolved, c: 1, f2p: 1, p2p: 1},
		{name: "a failing exit with only PASSED lines voids the log", exit: 1,
			statuses: st{"t.py::f1": pass, "t.py::f2[a-b]": pass, "t.py::p1": pass},
			rule:     reward.RuleUnresolved, c: 0.2, f2p: 0, p2p: 0, failing: []string{"t.py::f1", "t.py::f2[a-b]"}, void: true},
		{name: "no test in the log: the tests did not run", exit: 2, statuses: st{},
			rule: reward.RuleTestsNotRun, c: 0.1, f2p: 0, p2p: 0, failing: []string{"t.py::f1", "t.py::f2[a-b]"}},
		{name: "an id that is a prefix of a test's name is not that test", exit: 1,
			statuses: st{"t.py::f1": pass, "t.py::f2[a-b]": pass, "t.py::p1": fail},
			rule:     reward.RuleUnresolved, c: 0.2, f2p: 0.5, p2p: 0, failing: []string{"t.py::f2[a-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v reward.Verification
			r := *repo
			if tc.name == "an id that is a prefix of a test's name is not that test" {
				r.FailToPass = []string{"t.py::f1", "t.py::f2[a-"}
			}
			reward.GradeRepo(&v, &r, tc.statuses, tc.exit)
			require.Equal(t, tc.rule, v.Rule, v.Reason)
			require.Equal(t, tc.c, v.Correctness)
			require.Equal(t, tc.f2p, v.Repo.F2PRate)
			require.Equal(t, tc.p2p, v.Repo.P2PRate)
			require.Equal(t, tc.void, v.Repo.LogVoid)
			require.Equal(t, tc.rule == reward.RuleResolved, v.Repo.Resolved)
			if diff := cmp.Diff(tc.failing, v.Repo.F2PFailing); diff != "" {
				t.Errorf("F2P failing (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseTestLog(f *testing.F) {
	for _, s := range []string{"PASSED a::b\nFAILED a::c - x\n", "t (m.C) ... ok\nFAIL: t (m.C)\n", "test_x ok\n___ a.py:test_y ___\n",
		"--- PASS: TestA (0.00s)\n", "test m::a ... ok\n", "a::b \x1b[32mPASSED\x1b[0m\n", "PASSED a::b[x y]\nFAILED a::b[x z] - m\n",
		"PASSED t.py::f[/a/b c]\n", "x ... System check identified no issues (0 silenced)\nok\n", "FAILED t.py::x[MouseButton.LEFT]\n"} {
		f.Add(s)
	}
	parsers := []string{tasks.ParserPytest, tasks.ParserDjango, tasks.ParserSympy, tasks.ParserGoTest, tasks.ParserCargo,
		"parse_log_pytest_options", "parse_log_pytest_v2", "parse_log_matplotlib", "parse_log_seaborn"}
	f.Fuzz(func(t *testing.T, log string) {
		for _, p := range parsers {
			m, err := reward.ParseTestLog(p, log)
			require.NoError(t, err)
			for id, s := range m {
				require.NotEmpty(t, id)
				require.Contains(t, []reward.TestStatus{pass, fail, errd, skip, xf}, s)
			}
		}
		// parse_log_pytest's names are single words, and a line printed after the
		// log never makes a failed test pass.
		m, err := reward.ParseTestLog("parse_log_pytest", log)
		require.NoError(t, err)
		for id, s := range m {
			require.Len(t, strings.Fields(id), 1, "%q", id)
			if s == fail || s == errd {
				after, err := reward.ParseTestLog("parse_log_pytest", log+"\nPASSED "+id+"\n")
				require.NoError(t, err)
				require.Equal(t, s, after[id], "%q", id)
			}
		}
	})
}
