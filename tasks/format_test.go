package tasks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// swe is a file of the repository's testdata/swe.
func swe(name string) string { return filepath.Join("..", "testdata", "swe", name) }

func TestDetectFormatOfRealFiles(t *testing.T) {
	tp := "diff --git a/tests/test_f.py b/tests/test_f.py\n"
	for _, tc := range []struct {
		name, path string
		want       tasks.Format
	}{
		{"SWE-bench JSONL (F2P as strings)", swe("tasks.jsonl"), tasks.FormatSWE},
		{"SWE-smith JSONL (image_name, a bug patch)", swe("smith.jsonl"), tasks.FormatSWE},
		{"a Harbor task directory", filepath.Join("..", "testdata", "harbor", "toy-add"), tasks.FormatHarbor},
		{"a directory of Harbor tasks", filepath.Join("..", "testdata", "harbor"), tasks.FormatHarbor},
		{"prompt JSONL", writeFile(t, "p.jsonl", "\n"+`{"prompt": "Write f.", "test_code": "assert True"}`+"\n"), tasks.FormatPrompt},
		{"task JSON with a byte order mark", writeFile(t, "p.json", "\xef\xbb\xbf"+`{"task": "Write f."}`), tasks.FormatPrompt},
		{"SWE-bench Parquet", writeParquet(t, "bench.parquet", []sweParquetRow{{InstanceID: "a__b-1", Repo: "a/b", TestPatch: tp,
			ProblemStatement: "p", F2PString: ptr(`["tests/test_f.py::a"]`)}}), tasks.FormatSWE},
		{"SWE-Gym Parquet", writeParquet(t, "gym.parquet", []sweGymRow{{InstanceID: "a__b-2", F2P: []string{"x"}}}), tasks.FormatSWE},
		{"prompt Parquet", writeParquet(t, "hf.parquet", []hfRow{{Prompt: ptr("P1"), TestCode: ptr("T1")}}), tasks.FormatPrompt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.DetectFormat(tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDetectFormatRefusesWhatItCannotTell(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		is         error
		msg        string
	}{
		{"other columns", writeFile(t, "x.jsonl", `{"question": "q", "answer": "a"}`), tasks.ErrUnknownFormat,
			`has the columns "answer", "question": neither task text ("prompt" or "task") nor SWE-bench rows`},
		{"an empty file", writeFile(t, "e.jsonl", "\n\n"), tasks.ErrNoTasks, "has no rows"},
		{"not JSON", writeFile(t, "n.jsonl", "prompt,tests\n"), tasks.ErrMalformed, "row 1"},
		{"a CSV file", writeFile(t, "t.csv", "prompt\n"), tasks.ErrUnknownFormat, "not a .jsonl, .json or .parquet file"},
		{"a directory without task.toml", t.TempDir(), tasks.ErrUnknownFormat, "holds no task.toml"},
		{"a missing file", filepath.Join(t.TempDir(), "missing.jsonl"), os.ErrNotExist, "missing.jsonl"},
		{"not Parquet", writeFile(t, "bad.parquet", "not parquet at all"), nil, "not a readable Parquet file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.DetectFormat(tc.path)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"prompt", "swe", "harbor", " SWE "} {
		_, err := tasks.ParseFormat(s)
		require.NoError(t, err, s)
	}
	_, err := tasks.ParseFormat("csv")
	require.EqualError(t, err, `tasks: unknown format "csv" (prompt, swe or harbor)`)
}

func TestLoadHarborDirAndSpecsFromFiles(t *testing.T) {
	// The toy repository is in no built-in table: its Harbor task and its SWE-smith row
	// need the specification file.
	_, err := tasks.LoadHarborDir(filepath.Join("..", "testdata", "harbor"), tasks.SWEConfig{})
	require.ErrorIs(t, err, tasks.ErrUnknownRepo)
	_, err = tasks.LoadSWE(swe("smith.jsonl"), tasks.SWEConfig{})
	require.ErrorIs(t, err, tasks.ErrUnknownRepo)

	specs, err := tasks.LoadRepoSpecs(swe("specs.json"))
	require.NoError(t, err)
	require.Contains(t, specs, "django/django", "the built-in table is kept")
	cfg := tasks.SWEConfig{Specs: specs}

	for _, dir := range []string{"harbor", filepath.Join("harbor", "toy-add")} {
		ts, err := tasks.LoadHarborDir(filepath.Join("..", "testdata", dir), cfg)
		require.NoError(t, err, dir)
		require.Len(t, ts, 1)
		require.Equal(t, "agentic-opd__swe-toy-1", ts[0].ID)
		require.Equal(t, "swebench/agentic-opd-swe-toy:1", ts[0].Repo.Image)
		require.Equal(t, "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_arith.py", ts[0].Repo.TestCommand,
			"the spec's command with the test patch's files")
	}
	ts, err := tasks.LoadSWE(swe("smith.jsonl"), cfg)
	require.NoError(t, err)
	require.Equal(t, "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_arith.py", ts[0].Repo.TestCommand,
		"the spec's command with the hidden test files")

	// A row's own test_cmd runs as written: no test file is appended to it.
	ts, err = tasks.LoadSWE(swe("tasks.jsonl"), cfg)
	require.NoError(t, err)
	require.Equal(t, "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_arith.py", ts[0].Repo.TestCommand)

	_, err = tasks.LoadHarborDir(t.TempDir(), cfg)
	require.ErrorIs(t, err, tasks.ErrNoTasks)
}

func TestLoadRepoSpecsRefusesBadEntries(t *testing.T) {
	for _, tc := range []struct{ name, json, msg string }{
		{"not an object", `[]`, `want a JSON object by "owner/repo"`},
		{"an unknown key", `{"a/b": {"test_cmd": "pytest", "log_parser": "pytest", "parser": "x"}}`, `"a/b": unknown field "parser"`},
		{"no test command", `{"a/b": {"log_parser": "pytest"}}`, `"a/b" has no test_cmd`},
		{"an unknown parser", `{"a/b": {"test_cmd": "pytest", "log_parser": "junit"}}`, `"a/b": unknown log_parser "junit"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "specs.json", tc.json)
			_, err := tasks.LoadRepoSpecs(path)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	_, err := tasks.LoadRepoSpecs(filepath.Join(t.TempDir(), "none.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
