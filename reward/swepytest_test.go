package reward_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
)

// TestPytestConfigSectionsPutBack: an agent's change to pytest's sections of setup.cfg
// or pyproject.toml is undone and the rest of its change kept; where the two cannot
// be told apart for certain, merging refuses (the whole file is then put back).
func TestPytestConfigSectionsPutBack(t *testing.T) {
	const startCfg = "[metadata]\nname = toycalc\n\n[tool:pytest]\ntestpaths = tests\n"
	const startTOML = "[project]\nname = \"toycalc\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n"
	for _, tc := range []struct {
		name, file, start, agent string
		same, ok                 bool
		keep                     []string // text of the agent's that the merge keeps
	}{
		{name: "setup.cfg: another section changed", file: "setup.cfg", start: startCfg,
			agent: "[metadata]\nname = toycalc2\n\n[tool:pytest]\ntestpaths = tests\n", same: true},
		{name: "setup.cfg: addopts added, metadata changed", file: "setup.cfg", start: startCfg,
			agent: "[metadata]\nname = toycalc2\n\n[tool:pytest]\ntestpaths = tests\naddopts = -p toycalc.passall\n",
			ok:    true, keep: []string{"name = toycalc2"}},
		{name: "setup.cfg: an old-style [pytest] section", file: "setup.cfg", start: startCfg,
			agent: startCfg + "[pytest]\naddopts = -p x\n", ok: true},
		{name: "setup.cfg: a header with a comment, in capitals", file: "setup.cfg", start: startCfg,
			agent: "[metadata]\nname = toycalc\n[TOOL:PYTEST] ; mine\naddopts = -p x\n", ok: true},
		{name: "setup.cfg: lines broken by carriage returns alone", file: "setup.cfg", start: startCfg,
			agent: "[metadata]\rname = toycalc\r[tool:pytest]\raddopts = -p x\r", ok: true},
		{name: "setup.cfg: a header after a form feed", file: "setup.cfg", start: startCfg,
			agent: "[metadata]\nname = toycalc\f[tool:pytest]\naddopts = -p x\n", ok: true},
		{name: "setup.cfg: a byte-order mark and an indented header", file: "setup.cfg", start: "",
			agent: "\ufeff  [tool:pytest]\naddopts = -p x\n", ok: true},
		{name: "setup.cfg: a new file with a section", file: "setup.cfg", start: "",
			agent: "[options]\nzip_safe = False\n[tool:pytest]\naddopts = -p x\n", ok: true, keep: []string{"zip_safe = False"}},
		{name: "pyproject.toml: the project changed", file: "pyproject.toml", start: startTOML,
			agent: strings.Replace(startTOML, "toycalc", "toycalc2", 1), same: true},
		{name: "pyproject.toml: addopts added", file: "pyproject.toml", start: startTOML,
			agent: "[project]\nname = \"toycalc2\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\naddopts = \"-p x\"\n\n[tool.black]\nline-length = 99\n",
			ok:    true, keep: []string{"toycalc2", "line-length = 99"}},
		{name: "pyproject.toml: a quoted, spaced header", file: "pyproject.toml", start: startTOML,
			agent: startTOML + "[ tool . \"pytest\" . ini_options . x ]\ny = 1\n", ok: true},
		{name: "pyproject.toml: pytest 9's own table", file: "pyproject.toml", start: startTOML,
			agent: startTOML + "\n[tool.pytest]\naddopts = [\"-p\", \"x\"]\n", ok: true},
		{name: "pyproject.toml: dotted keys in [tool] cannot be cut out", file: "pyproject.toml", start: startTOML,
			agent: startTOML + "\n[tool]\npytest.ini_options.addopts = \"-p x\"\n", ok: false},
		{name: "pyproject.toml: an inline table cannot be cut out", file: "pyproject.toml", start: "",
			agent: "tool = {pytest = {ini_options = {addopts = \"-p x\"}}}\n", ok: false},
		{name: "pyproject.toml: a header inside a multi-line string", file: "pyproject.toml", start: startTOML,
			agent: "[project]\ndescription = \"\"\"\n[tool.pytest.ini_options]\n\"\"\"\nname = \"toycalc\"\n\n[tool.pytest.ini_options]\naddopts = \"-p x\"\n", ok: false},
		{name: "pyproject.toml: an escape spells pytest", file: "pyproject.toml", start: startTOML,
			agent: startTOML + "[tool.\"p\\u0079test\".other]\naddopts = \"-p x\"\n", ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same, decided := reward.SamePytestConfig(tc.file, tc.start, tc.agent)
			require.True(t, decided)
			require.Equal(t, tc.same, same)
			if tc.same {
				return
			}
			merged, ok := reward.MergePytestConfig(tc.file, tc.start, tc.agent)
			require.Equal(t, tc.ok, ok, "merged:\n%s", merged)
			if !ok {
				return
			}
			same, decided = reward.SamePytestConfig(tc.file, tc.start, merged)
			require.True(t, decided)
			require.True(t, same, "the merge changed pytest's sections:\n%s", merged)
			for _, k := range tc.keep {
				require.Contains(t, merged, k)
			}
		})
	}
}
