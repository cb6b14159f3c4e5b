package reward_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/tasks"
)

// TestParseTestLogSWEBenchNames: each parser names a test as the SWE-bench harness's
// parser of that name does, so that the names the datasets hold (cut at a space,
// shortened paths, docstrings, …) are found by exact comparison, and only the tests
// they name.
func TestParseTestLogSWEBenchNames(t *testing.T) {
	for _, tc := range []struct {
		name, parser, log string
		want              st
	}{
		{
			name: "pytest: parameters with spaces are cut at the first one, as pytest-dev__pytest-7373 stores them", parser: "parse_log_pytest",
			log: "PASSED testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT internal_err]\n" +
				"PASSED testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT (internal_err)]\n" +
				"PASSED testing/test_mark.py::test_marker_expr_eval_failure_handling[bogus/]\n" +
				"PASSED testing/test_mark.py::test_mark_option[xyz-expected_passed0]\n" +
				"PASSED testing/test_mark.py::test_mark_option[xyz and xyz2-expected_passed3]\n" +
				"PASSED testing/test_mark.py::test_mark_option[xyz2-expected_passed4]\n" +
				"PASSED testing/test_mark.py::test_mark_option[xyz or xyz2-expected_passed5]\n",
			want: st{
				"testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT":     pass,
				"testing/test_mark.py::test_marker_expr_eval_failure_handling[bogus/]": pass,
				"testing/test_mark.py::test_mark_option[xyz-expected_passed0]":         pass,
				"testing/test_mark.py::test_mark_option[xyz":                           pass,
				"testing/test_mark.py::test_mark_option[xyz2-expected_passed4]":        pass,
			},
		},
		{
			name: "pytest: tests cut to one name share it with their worst status", parser: "pytest",
			log: "FAILED testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT internal_err] - Failed: nomatch\n" +
				"PASSED testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT (internal_err)]\n",
			want: st{"testing/test_mark.py::test_marker_expr_eval_failure_handling[NOT": fail},
		},
		{
			name: "pytest: \" - \" inside a failed test's parameter", parser: "pytest",
			log: "FAILED t.py::test_sub[a - b] - assert 1 == 2\nFAILED t.py::test_neg[-] - assert 0\n" +
				"PASSED t.py::test_dash[x - y]\nFAILED t.py::test_plain - AssertionError: x - y\nFAILED t.py::test_sp[a b - c] - msg\n",
			want: st{"t.py::test_sub[a": fail, "t.py::test_neg[-]": fail, "t.py::test_dash[x": pass, "t.py::test_plain": fail,
				"t.py::test_sp[a": fail},
		},
		{
			name: "pytest: unicode in an id; Python's white space (no-break space, U+001C) cuts it", parser: "pytest",
			log:  "PASSED t.py::test_unicode[é-ü-日本]\nPASSED t.py::test_nbsp[a\u00a0b]\nPASSED t.py::test_fs[a\x1cb]\nPASSED t.py::test_zwsp[a\u200bb]\n",
			want: st{"t.py::test_unicode[é-ü-日本]": pass, "t.py::test_nbsp[a": pass, "t.py::test_fs[a": pass, "t.py::test_zwsp[a\u200bb]": pass},
		},
		{
			name: "pytest: only lines that start with a status word, and only the five", parser: "pytest",
			log:  "  PASSED t.py::test_indented\nPASSEDX t.py::test_a\nXPASS t.py::test_b\nSKIPPED [2] t.py:4: no db\nPASSED [100%]\n",
			want: st{"[100%]": pass},
		},
		{
			name: "pytest_options: an absolute path in the parameter is shortened to its last element", parser: "parse_log_pytest_options",
			log: "PASSED tests/test_filereader.py::test_read[/testbed/pydicom/data/test_files/CT_small.dcm]\n" +
				"PASSED tests/test_x.py::test_unc[//server/share/f]\nPASSED tests/test_x.py::test_glob[/a/*.py]\n" +
				"FAILED tests/test_x.py::test_tail[a]b - x\nPASSED tests/test_x.py::test_cut[/tmp/a b]\n",
			want: st{"tests/test_filereader.py::test_read[/CT_small.dcm]": pass, "tests/test_x.py::test_unc[//server/share/f]": pass,
				"tests/test_x.py::test_glob[/a/*.py]": pass, "tests/test_x.py::test_tail[a]": fail, "tests/test_x.py::test_cut[/tmp/a": pass},
		},
		{
			name: "pytest_v2: the first word (v4.1, the datasets' names) and the whole id (v5)", parser: "parse_log_astropy",
			log: "PASSED astropy/units/tests/test_format.py::test_ogip_grammar_fail[log(photon /cm**2 /s /Hz) (sin( /pixel /s))]\n" +
				"astropy/io/tests/test_a.py::test_b[x y] \x1b[1mFAILED\x1b[0m\n" +
				"FAILED astropy/io/tests/test_a.py::test_c[p - q] - AssertionError\n" +
				"astropy/io/tests/test_a.py::test_d [1mPASSED[0m\n",
			want: st{
				"astropy/units/tests/test_format.py::test_ogip_grammar_fail[log(photon":                                   pass,
				"astropy/units/tests/test_format.py::test_ogip_grammar_fail[log(photon /cm**2 /s /Hz) (sin( /pixel /s))]": pass,
				"astropy/io/tests/test_a.py::test_b[x":                                                                    fail,
				"astropy/io/tests/test_a.py::test_b[x y]":                                                                 fail,
				"astropy/io/tests/test_a.py::test_c[p":                                                                    fail,
				"astropy/io/tests/test_a.py::test_d":                                                                      pass,
			},
		},
		{
			name: "matplotlib: MouseButton.LEFT and RIGHT are written 1 and 3", parser: "parse_log_matplotlib",
			log:  "PASSED lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.LEFT]\nFAILED lib/matplotlib/tests/test_widgets.py::test_lasso[MouseButton.RIGHT-x] - e\n",
			want: st{"lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[1]": pass, "lib/matplotlib/tests/test_widgets.py::test_lasso[3-x]": fail},
		},
		{
			name: "seaborn: FAILED and PASSED only, verbose lines by their first word", parser: "parse_log_seaborn",
			log:  "tests/test_core.py::test_a PASSED [ 50%]\nERROR tests/test_core.py::test_b - boom\nFAILED tests/test_core.py::test_c\nPASSED tests/test_core.py::test_d[x y]\n",
			want: st{"tests/test_core.py::test_a": pass, "tests/test_core.py::test_c": fail, "tests/test_core.py::test_d[x": pass},
		},
		{
			name: "django: Python 3.11 names, a docstring's first line, an ok after the test's output", parser: "parse_log_django",
			log: "test_ok (admin_views.tests.AdminViewBasicTest.test_ok) ... ok\n" +
				"test_doc (admin_views.tests.AdminViewBasicTest.test_doc)\nRegression test for #12345: the changelist's é. ... ok\n" +
				"test_out (migrations.test_commands.MakeMigrationsTests.test_out) ... Migrations for 'migrations':\n  0001_initial.py\nok\n" +
				"test_sys (check_framework.tests.T) ... System check identified no issues (0 silenced)\nok\n" +
				"test_fail (m.T) ... FAIL\n======\nFAIL: test_fail (m.T)\nERROR: test_err (m.T)\n",
			want: st{
				"test_ok (admin_views.tests.AdminViewBasicTest.test_ok)":           pass,
				"Regression test for #12345: the changelist's é.":                  pass,
				"test_out (migrations.test_commands.MakeMigrationsTests.test_out)": pass,
				"test_sys (check_framework.tests.T)":                               pass,
				"test_fail (m.T)":                                                  fail,
				"test_fail":                                                        fail,
				"test_err":                                                         errd,
			},
		},
		{
			name: "django: a later ok does not cover a failure", parser: "django",
			log:  "test_a (m.T) ... FAIL\nok\n",
			want: st{"test_a (m.T)": fail},
		},
		{
			name: "go test: the name runs to the last \" (\", which ends the line", parser: "parse_log_gotest",
			log:  "--- FAIL: TestParse/a_(b) (0.00s)\n    --- PASS: TestParse/c (0.01s)\n--- PASS: TestParse/d (0.00s) and more\n",
			want: st{"TestParse/a_(b)": fail, "TestParse/c": pass},
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
}

// TestParseTestLogParserNames: every parser name of the SWE-bench harness for the
// languages graded here is read, with or without its "parse_log_" prefix.
func TestParseTestLogParserNames(t *testing.T) {
	for _, name := range []string{"pytest", "pytest_options", "pytest_v2", "django", "sympy", "matplotlib", "seaborn",
		"astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff", "xarray", "pydicom", "requests", "pylint",
		"astropy", "scikit", "sphinx", "gotest", "cargo"} {
		for _, p := range []string{name, "parse_log_" + name} {
			_, err := reward.ParseTestLog(p, "")
			require.NoError(t, err, p)
		}
	}
	for _, p := range []string{tasks.ParserPytest, tasks.ParserDjango, tasks.ParserSympy, tasks.ParserGoTest, tasks.ParserCargo} {
		_, err := reward.ParseTestLog(p, "")
		require.NoError(t, err, p)
	}
}

// TestGradeRepoSWEBenchNames grades the log of a run against a row's names: a name
// cut at a space passes when every test it stands for passed, and a name is never
// another test's prefix.
func TestGradeRepoSWEBenchNames(t *testing.T) {
	const f = "testing/test_mark.py::"
	// pytest-dev__pytest-7373's names for these tests, as its row stores them.
	repo := &tasks.Repo{
		FailToPass: []string{f + "TestFunctional::test_reevaluate_dynamic_expr"},
		PassToPass: []string{f + "test_marker_expr_eval_failure_handling[NOT", f + "test_marker_expr_eval_failure_handling[bogus/]",
			f + "test_mark_option[xyz-expected_passed0]", f + "test_mark_option[xyz", f + "test_mark_option[xyz2-expected_passed4]",
			f + "TestKeywordSelection::test_select_extra_keywords[xxx]", f + "TestKeywordSelection::test_select_extra_keywords[xxx"},
	}
	run := func(notNot string) string {
		return "PASSED " + f + "TestFunctional::test_reevaluate_dynamic_expr\n" +
			"PASSED " + f + "test_marker_expr_eval_failure_handling[NOT internal_err]\n" +
			notNot + " " + f + "test_marker_expr_eval_failure_handling[NOT (internal_err)]\n" +
			"PASSED " + f + "test_marker_expr_eval_failure_handling[bogus/]\n" +
			"PASSED " + f + "test_mark_option[xyz-expected_passed0]\n" +
			"PASSED " + f + "test_mark_option[xyz and xyz2-expected_passed3]\n" +
			"PASSED " + f + "test_mark_option[xyz2-expected_passed4]\n" +
			"PASSED " + f + "test_mark_option[xyz or xyz2-expected_passed5]\n" +
			"PASSED " + f + "TestKeywordSelection::test_select_extra_keywords[xxx]\n" +
			"PASSED " + f + "TestKeywordSelection::test_select_extra_keywords[xxx and test_2]\n" +
			"PASSED " + f + "TestKeywordSelection::test_select_extra_keywords[xxx and not test_1]\n"
	}
	for _, tc := range []struct {
		name    string
		repo    *tasks.Repo
		log     string
		rule    reward.Rule
		failing []string
	}{
		{name: "the gold patch's run: every name passes", repo: repo, log: run("PASSED"), rule: reward.RuleResolved},
		{name: "one of the two tests cut to [NOT failed", repo: repo, log: run("FAILED"), rule: reward.RuleUnresolved,
			failing: []string{f + "test_marker_expr_eval_failure_handling[NOT"}},
		{name: "a planted PASSED line for the cut name does not cover the failure", repo: repo,
			log: run("FAILED") + "PASSED " + f + "test_marker_expr_eval_failure_handling[NOT\n", rule: reward.RuleUnresolved,
			failing: []string{f + "test_marker_expr_eval_failure_handling[NOT"}},
		{name: "a name is not its longer neighbour", log: "PASSED t.py::test_f[ab]\nPASSED t.py::test_g\n",
			repo: &tasks.Repo{FailToPass: []string{"t.py::test_f[a"}, PassToPass: []string{"t.py::test_g"}},
			rule: reward.RuleUnresolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statuses, err := reward.ParseTestLog("parse_log_pytest", tc.log)
			require.NoError(t, err)
			var v reward.Verification
			reward.GradeRepo(&v, tc.repo, statuses, 0)
			require.Equal(t, tc.rule, v.Rule, v.Reason)
			if diff := cmp.Diff(tc.failing, v.Repo.P2PFailing); diff != "" {
				t.Errorf("PASS_TO_PASS failing (-want +got):\n%s", diff)
			}
		})
	}
}
