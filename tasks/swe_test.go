package tasks_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

const toyBase = "1e9c69279c37989248012beee7d840ff918e341f"

func readPatch(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "swe", "patches", name))
	require.NoError(t, err)
	return string(b)
}

func TestLoadSWEToyTasks(t *testing.T) {
	got, err := tasks.LoadSWE(filepath.Join("..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	require.Len(t, got, 3)
	pytest := "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider "
	want := []*tasks.Repo{
		{ // FAIL_TO_PASS as SWE-bench's JSON string
			Image: "swebench/sweb.eval.x86_64.agentic-opd_1776_swe-toy-1:latest", Name: "agentic-opd/swe-toy",
			Version: "0.1", BaseCommit: toyBase, TestPatch: readPatch(t, "add.test.patch"), GoldPatch: readPatch(t, "add.gold.patch"),
			TestCommand: pytest + "tests/test_arith.py", LogParser: "parse_log_pytest",
			FailToPass: []string{"tests/test_arith.py::test_add"},
			PassToPass: []string{"tests/test_arith.py::test_mul", "tests/test_arith.py::test_sub"},
		},
		{ // as a JSON array
			Image: "swebench/sweb.eval.x86_64.agentic-opd_1776_swe-toy-2:latest", Name: "agentic-opd/swe-toy",
			Version: "0.1", BaseCommit: toyBase, TestPatch: readPatch(t, "word_count.test.patch"),
			GoldPatch: readPatch(t, "word_count.gold.patch"), TestCommand: pytest + "tests/test_text.py", LogParser: "parse_log_pytest",
			FailToPass: []string{"tests/test_text.py::test_word_count_spaces"},
			PassToPass: []string{"tests/test_text.py::test_word_count_simple"},
		},
	}
	for i, w := range want {
		if diff := cmp.Diff(w, got[i].Repo); diff != "" {
			t.Errorf("task %d repo (-want +got):\n%s", i, diff)
		}
	}
	require.Equal(t, "agentic-opd__swe-toy-1", got[0].ID)
	require.Contains(t, got[0].Statement, "toycalc.add(2, 3)")
	require.True(t, got[0].HasTests())
	require.Equal(t, []string{"tests/test_clamp.py"}, got[2].Repo.TestFiles())
}

func TestTestListEncodings(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       tasks.TestList
		err        string
	}{
		{name: "array", json: `["a::b", "c"]`, want: tasks.TestList{"a::b", "c"}},
		{name: "string holding an array", json: `"[\"a::b\", \"c\"]"`, want: tasks.TestList{"a::b", "c"}},
		{name: "null", json: `null`},
		{name: "empty string", json: `""`},
		{name: "string not holding an array", json: `"a::b"`, err: "does not hold a JSON array"},
		{name: "array of numbers", json: `[1, 2]`, err: "want a list of test ids"},
		{name: "object", json: `{"a": 1}`, err: "want a list of test ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got tasks.TestList
			err := json.Unmarshal([]byte(tc.json), &got)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func sweLine(t *testing.T, over map[string]any) string {
	t.Helper()
	row := map[string]any{
		"instance_id": "pallets__flask-1", "repo": "pallets/flask", "base_commit": "abc",
		"problem_statement": "fix it", "patch": "diff --git a/f.py b/f.py\n",
		"test_patch":   "diff --git a/tests/test_f.py b/tests/test_f.py\n--- a/tests/test_f.py\n+++ b/tests/test_f.py\n",
		"FAIL_TO_PASS": `["tests/test_f.py::test_x"]`, "PASS_TO_PASS": "[]",
	}
	for k, v := range over {
		if v == nil {
			delete(row, k)
			continue
		}
		row[k] = v
	}
	b, err := json.Marshal(row)
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestReadSWEJSONLRefusesBadRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		over map[string]any
		err  []string
	}{
		{name: "unknown repository", over: map[string]any{"repo": "acme/widgets"},
			err: []string{`repository "acme/widgets"`, "SWEConfig.Specs", `"test_cmd" and "log_parser"`}},
		{name: "empty FAIL_TO_PASS", over: map[string]any{"FAIL_TO_PASS": "[]"}, err: []string{`empty "FAIL_TO_PASS"`}},
		{name: "FAIL_TO_PASS not a list", over: map[string]any{"FAIL_TO_PASS": "tests/test_f.py::test_x"},
			err: []string{"does not hold a JSON array"}},
		{name: "no test patch", over: map[string]any{"test_patch": nil}, err: []string{`no "test_patch"`}},
		{name: "no problem statement", over: map[string]any{"problem_statement": ""}, err: []string{`no "problem_statement"`}},
		{name: "unknown parser", over: map[string]any{"log_parser": "parse_log_cobol"}, err: []string{`unknown log parser "parse_log_cobol"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.ReadSWEJSONL(strings.NewReader("\n"+sweLine(t, tc.over)), "rows.jsonl", tasks.SWEConfig{})
			require.ErrorIs(t, err, tasks.ErrMalformed)
			require.ErrorContains(t, err, "rows.jsonl: row 2")
			for _, s := range tc.err {
				require.ErrorContains(t, err, s)
			}
			if tc.name == "unknown repository" {
				require.ErrorIs(t, err, tasks.ErrUnknownRepo)
			}
		})
	}
	_, err := tasks.ReadSWEJSONL(strings.NewReader("\n\n"), "empty.jsonl", tasks.SWEConfig{})
	require.ErrorIs(t, err, tasks.ErrNoTasks)
}

func TestReadSWEJSONLRowsOfOtherDatasets(t *testing.T) {
	smithPatch := "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n"
	for _, tc := range []struct {
		name string
		cfg  tasks.SWEConfig
		over map[string]any
		want *tasks.Repo
	}{
		{
			name: "SWE-smith: image per repository, the patch brings the bug, F2P files hidden",
			over: map[string]any{
				"instance_id": "pallets__flask.bc098406.func_basic__x1", "test_patch": nil, "base_commit": nil,
				"image_name": "swesmith.x86_64.pallets__flask.bc098406", "patch": smithPatch,
				"FAIL_TO_PASS": []string{"tests/test_a.py::test_x", "tests/test_b.py::test_y[1]", "tests/test_a.py::test_z"},
				"PASS_TO_PASS": []string{"tests/test_c.py::test_w"},
			},
			want: &tasks.Repo{
				Image: "swebench/swesmith.x86_64.pallets_1776_flask.bc098406", Name: "pallets/flask",
				Setup: smithPatch, GoldPatch: smithPatch, GoldReversed: true,
				HiddenFiles: []string{"tests/test_a.py", "tests/test_b.py"},
				TestCommand: "pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_a.py tests/test_b.py",
				LogParser:   tasks.ParserPytest,
				FailToPass:  []string{"tests/test_a.py::test_x", "tests/test_b.py::test_y[1]", "tests/test_a.py::test_z"},
				PassToPass:  []string{"tests/test_c.py::test_w"},
			},
		},
		{
			name: "SWE-rebench V2: install_config as a string, its own command and parser, unknown repository",
			over: map[string]any{
				"repo": "acme/widgets", "image_name": "registry.example/acme/widgets:1",
				"install_config": `{"test_cmd": ["make build", "pytest -rA"], "log_parser": "parse_log_pytest_v2"}`,
				"FAIL_TO_PASS":   []string{"t.py::a"}, "version": 2.1,
			},
			want: &tasks.Repo{
				Image: "registry.example/acme/widgets:1", WorkDir: "/widgets", Name: "acme/widgets", Version: "2.1", BaseCommit: "abc",
				TestPatch:   "diff --git a/tests/test_f.py b/tests/test_f.py\n--- a/tests/test_f.py\n+++ b/tests/test_f.py\n",
				GoldPatch:   "diff --git a/f.py b/f.py\n",
				TestCommand: "make build ; pytest -rA", LogParser: "parse_log_pytest_v2", FailToPass: []string{"t.py::a"},
				PassToPass: []string{},
			},
		},
		{
			name: "SWE-bench v5: the row's image, a prefix for bare names unused",
			cfg:  tasks.SWEConfig{ImagePrefix: "mirror.local/"},
			over: map[string]any{"image": "registry.local:5000/sweb.eval.x86_64.flask:v1", "PASS_TO_PASS": nil},
			want: &tasks.Repo{
				Image: "registry.local:5000/sweb.eval.x86_64.flask:v1", Name: "pallets/flask", BaseCommit: "abc",
				TestPatch:   "diff --git a/tests/test_f.py b/tests/test_f.py\n--- a/tests/test_f.py\n+++ b/tests/test_f.py\n",
				GoldPatch:   "diff --git a/f.py b/f.py\n",
				TestCommand: "pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_f.py", LogParser: tasks.ParserPytest,
				FailToPass: []string{"tests/test_f.py::test_x"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ReadSWEJSONL(strings.NewReader(sweLine(t, tc.over)), "rows.jsonl", tc.cfg)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got[0].Repo); diff != "" {
				t.Errorf("repo (-want +got):\n%s", diff)
			}
		})
	}
}

// sweParquetRow has SWE-bench's columns; F2P as a string (SWE-bench) or a list (SWE-Gym).
type sweParquetRow struct {
	InstanceID       string   `parquet:"instance_id"`
	Repo             string   `parquet:"repo"`
	BaseCommit       string   `parquet:"base_commit"`
	Patch            string   `parquet:"patch"`
	TestPatch        string   `parquet:"test_patch"`
	ProblemStatement string   `parquet:"problem_statement"`
	F2PString        *string  `parquet:"FAIL_TO_PASS,optional"`
	P2PList          []string `parquet:"PASS_TO_PASS,list"`
	Created          float64  `parquet:"created_at"`
}

type sweGymRow struct {
	InstanceID       string   `parquet:"instance_id"`
	Repo             string   `parquet:"repo"`
	BaseCommit       string   `parquet:"base_commit"`
	TestPatch        string   `parquet:"test_patch"`
	ProblemStatement string   `parquet:"problem_statement"`
	F2P              []string `parquet:"FAIL_TO_PASS,list"`
}

func TestLoadSWEParquetAndHub(t *testing.T) {
	tp := "diff --git a/tests/test_f.py b/tests/test_f.py\n"
	bench := []sweParquetRow{{InstanceID: "psf__requests-1", Repo: "psf/requests", BaseCommit: "b1", TestPatch: tp,
		ProblemStatement: "p", F2PString: ptr(`["tests/test_f.py::a"]`), P2PList: []string{"tests/test_f.py::b"}}}
	gym := []sweGymRow{{InstanceID: "psf__requests-2", Repo: "psf/requests", BaseCommit: "b2", TestPatch: tp,
		ProblemStatement: "q", F2P: []string{"tests/test_f.py::c"}}}

	got, err := tasks.LoadSWE(writeParquet(t, "bench.parquet", bench), tasks.SWEConfig{})
	require.NoError(t, err)
	require.Equal(t, []string{"tests/test_f.py::a"}, got[0].Repo.FailToPass)
	require.Equal(t, []string{"tests/test_f.py::b"}, got[0].Repo.PassToPass)

	hub := newFakeHub(t)
	hub.files["SWE-Gym/SWE-Gym/default/train"] = [][]byte{parquetBytes(t, gym)}
	cfg := tasks.HubConfig{Dataset: "SWE-Gym/SWE-Gym", CacheDir: t.TempDir(), BaseURL: hub.srv.URL}
	got, err = tasks.LoadSWEHub(context.Background(), cfg, tasks.SWEConfig{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "psf__requests-2", got[0].ID)
	require.Equal(t, []string{"tests/test_f.py::c"}, got[0].Repo.FailToPass)
	require.Equal(t, "swebench/sweb.eval.x86_64.psf_1776_requests-2:latest", got[0].Repo.Image)
}

func writeHarbor(t *testing.T, toml string, config any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fix-add")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("Fix add.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644))
	if config != nil {
		b, err := json.Marshal(config)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "config.json"), b, 0o644))
	}
	return dir
}

func TestLoadHarbor(t *testing.T) {
	config := map[string]any{"repo": "pallets/flask", "base_commit": toyBase, "test_patch": readPatch(t, "add.test.patch"),
		"patch": readPatch(t, "add.gold.patch"), "FAIL_TO_PASS": `["tests/test_arith.py::test_add"]`}
	prebuilt := "version = \"1.0\"\n[verifier]\ntimeout_sec = 120.0\n[environment]\ndocker_image = \"registry.example/acme/toy:1\" # prebuilt\nallow_internet = false\n"
	t.Run("prebuilt image and SWE-style data", func(t *testing.T) {
		got, err := tasks.LoadHarbor(writeHarbor(t, prebuilt, config), tasks.SWEConfig{})
		require.NoError(t, err)
		require.Equal(t, "fix-add", got.ID)
		require.Equal(t, "Fix add.\n", got.Statement)
		require.Equal(t, "registry.example/acme/toy:1", got.Repo.Image)
		require.Equal(t, "2m0s", got.Repo.TestTimeout.String())
		require.False(t, got.Repo.Network)
	})
	for _, tc := range []struct {
		name, toml string
		config     any
		err        string
	}{
		{name: "Dockerfile only", toml: "[environment]\ncpus = 1\n", config: config,
			err: "building environment/Dockerfile is out of scope"},
		{name: "a verifier without SWE-style data", toml: prebuilt, err: "no tests/config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.LoadHarbor(writeHarbor(t, tc.toml, tc.config), tasks.SWEConfig{})
			require.ErrorIs(t, err, tasks.ErrHarborUnsupported)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestPatchFilesAndCommands(t *testing.T) {
	patch := "diff --git a/tests/a b.py b/tests/a b.py\n--- a/tests/a b.py\n+++ b/tests/a b.py\n" +
		"diff --git a/tests/new.py b/tests/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new.py\n" +
		"diff --git a/tests/data.json b/tests/data.json\n"
	require.Equal(t, []string{"tests/a b.py", "tests/new.py", "tests/data.json"}, tasks.PatchFiles(patch))
	specs := tasks.RepoSpecs()
	require.Equal(t, "pytest --no-header -rA --tb=no -p no:cacheprovider 'tests/a b.py' tests/new.py",
		specs["pallets/flask"].Command("pallets/flask", patch))
	dj := "diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\n"
	require.Equal(t, "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 admin_views.tests",
		specs["django/django"].Command("django/django", dj))
}

func TestRepoPromptShowsTheIssueNotTheTests(t *testing.T) {
	ts, err := tasks.LoadSWE(filepath.Join("..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	msgs := tasks.Prompt{}.Messages(ts[0])
	require.Len(t, msgs, 2)
	require.Equal(t, tasks.RepoSystemPrompt, msgs[0].Content)
	user := msgs[1].Content
	require.Contains(t, user, "repository agentic-opd/swe-toy at /testbed")
	require.Contains(t, user, "toycalc.add(2, 3)")
	for _, secret := range []string{"test_add", "return a + b", "FAIL_TO_PASS", "add(-1, 1)"} {
		require.NotContains(t, user, secret)
	}
}

func FuzzReadSWEJSONL(f *testing.F) {
	f.Add(`{"instance_id":"a","repo":"psf/requests","problem_statement":"p","test_patch":"diff --git a/t.py b/t.py\n","FAIL_TO_PASS":"[\"t.py::x\"]"}`)
	f.Add(`{"instance_id":"a","repo":"x/y","image_name":"i","patch":"p","problem_statement":"p","FAIL_TO_PASS":["t.py::x"],"install_config":"{\"test_cmd\":[\"a\"],\"log_parser\":\"pytest\"}"}`)
	f.Fuzz(func(t *testing.T, data string) {
		ts, err := tasks.ReadSWEJSONL(strings.NewReader(data), "f.jsonl", tasks.SWEConfig{})
		if err != nil {
			return
		}
		for _, task := range ts {
			require.NotNil(t, task.Repo)
			require.NotEmpty(t, task.Repo.FailToPass)
			require.NotEmpty(t, task.Repo.TestCommand)
			require.NotEmpty(t, task.Repo.Image)
		}
	})
}
