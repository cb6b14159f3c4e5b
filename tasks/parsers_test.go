package tasks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestSWEBenchParserNames: every log parser name of the SWE-bench harness is known,
// and the repositories whose logs it reads with a parser of their own get that parser
// (whose names their datasets hold), not plain pytest's.
func TestSWEBenchParserNames(t *testing.T) {
	for _, name := range []string{"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2",
		"parse_log_astroid", "parse_log_flask", "parse_log_marshmallow", "parse_log_pvlib", "parse_log_pyvista",
		"parse_log_sqlfluff", "parse_log_xarray", "parse_log_pydicom", "parse_log_requests", "parse_log_pylint",
		"parse_log_scikit", "parse_log_sphinx", "parse_log_matplotlib", "parse_log_seaborn", "parse_log_django",
		"parse_log_sympy", "parse_log_gotest", "parse_log_cargo"} {
		require.NotEmpty(t, tasks.CanonicalParser(name), name)
	}
	specs := tasks.RepoSpecs()
	for repo, parser := range map[string]string{
		"astropy/astropy": "parse_log_pytest_v2", "sphinx-doc/sphinx": "parse_log_pytest_v2",
		"scikit-learn/scikit-learn": "parse_log_pytest_v2", "psf/requests": "parse_log_pytest_options",
		"pydicom/pydicom": "parse_log_pytest_options", "pylint-dev/pylint": "parse_log_pytest_options",
		"matplotlib/matplotlib": "parse_log_matplotlib", "mwaskom/seaborn": "parse_log_seaborn",
		"pallets/flask": tasks.ParserPytest,
	} {
		require.Equal(t, parser, specs[repo].LogParser, repo)
	}
}
