package tasks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// hiddenRow has the hidden-test and input/output columns, with lists as Parquet LISTs.
type hiddenRow struct {
	Prompt      string   `parquet:"prompt"`
	TestCode    *string  `parquet:"test_code,optional"`
	HiddenTests *string  `parquet:"hidden_tests,optional"`
	Inputs      []string `parquet:"inputs,list"`
	Outputs     []string `parquet:"outputs,list"`
}

// repeatedRow has the lists as repeated columns (the older Parquet layout).
type repeatedRow struct {
	Prompt  string   `parquet:"prompt"`
	Inputs  []string `parquet:"inputs"`
	Outputs []string `parquet:"outputs"`
}

func TestLoadersReadHiddenTestsAndCases(t *testing.T) {
	py := tasks.LanguagePython
	want := []tasks.Task{
		{ID: "1", Statement: "P1", TestCode: "T", HiddenTests: "H", Difficulty: "unknown", Language: py},
		{ID: "2", Statement: "P2", Cases: []tasks.Case{{Input: "1 2\n", Output: "3\n"}, {Input: "", Output: "0"}},
			Difficulty: "unknown", Language: py},
		{ID: "3", Statement: "P3", HiddenTests: "H3", Difficulty: "unknown", Language: py},
	}
	jsonl := `{"id": 1, "prompt": "P1", "test_code": "T", "hidden_tests": "H", "inputs": null, "outputs": null}
{"id": 2, "prompt": "P2", "inputs": ["1 2\n", ""], "outputs": ["3\n", "0"]}
{"id": 3, "prompt": "P3", "hidden_tests": "H3", "inputs": [], "outputs": []}
`
	got, report, err := tasks.ReadJSONL(strings.NewReader(jsonl), "data.jsonl", tasks.LoadConfig{})
	require.NoError(t, err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSONL tasks (-want +got):\n%s", diff)
	}
	require.Zero(t, report.NoTests, "hidden tests and cases count as tests")

	path := writeParquet(t, "cases.parquet", []hiddenRow{
		{Prompt: "P1", TestCode: ptr("T"), HiddenTests: ptr("H")},
		{Prompt: "P2", Inputs: []string{"1 2\n", ""}, Outputs: []string{"3\n", "0"}},
		{Prompt: "P3", HiddenTests: ptr("H3")},
	})
	got, _, err = tasks.LoadParquet(path, tasks.LoadConfig{})
	require.NoError(t, err)
	for i := range want {
		want[i].ID = "cases.parquet:" + want[i].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parquet tasks (-want +got):\n%s", diff)
	}

	path = writeParquet(t, "repeated.parquet", []repeatedRow{{Prompt: "P", Inputs: []string{"a", "b"}, Outputs: []string{"A", "B"}}})
	got, _, err = tasks.LoadParquet(path, tasks.LoadConfig{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, []tasks.Case{{Input: "a", Output: "A"}, {Input: "b", Output: "B"}}, got[0].Cases)

	// The Hub loader reads the same columns from the Hub's Parquet files.
	hub := newFakeHub(t)
	hub.files["acme/contest/default/train"] = [][]byte{parquetBytes(t, []hiddenRow{
		{Prompt: "P2", HiddenTests: ptr("H"), Inputs: []string{"x"}, Outputs: []string{"y"}},
	})}
	got, _, err = tasks.LoadHub(context.Background(), tasks.HubConfig{Dataset: "acme/contest", CacheDir: t.TempDir(), BaseURL: hub.srv.URL})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "H", got[0].HiddenTests)
	require.Equal(t, []tasks.Case{{Input: "x", Output: "y"}}, got[0].Cases)
}

func TestLoadersRefuseBadCases(t *testing.T) {
	for _, tc := range []struct {
		name, line, column, reason string
	}{
		{"inputs without outputs", `{"prompt": "P", "inputs": ["1"]}`, "outputs", "inputs and outputs come together"},
		{"outputs without inputs", `{"prompt": "P", "outputs": ["1"], "inputs": null}`, "outputs", "inputs and outputs come together"},
		{"lengths differ", `{"prompt": "P", "inputs": ["1", "2"], "outputs": ["1"]}`, "outputs", "1 outputs for 2 inputs"},
		{"a number in the list", `{"prompt": "P", "inputs": ["1", 2], "outputs": ["1", "2"]}`, "inputs", "want a list of strings"},
		{"a string instead of a list", `{"prompt": "P", "inputs": "1", "outputs": ["1"]}`, "inputs", "want a list of strings, have string"},
		{"hidden tests not a string", `{"prompt": "P", "hidden_tests": ["x"]}`, "hidden_tests", "want a string, have array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tasks.ReadJSONL(strings.NewReader(tc.line), "bad.jsonl", tasks.LoadConfig{})
			var re *tasks.RowError
			require.ErrorAs(t, err, &re)
			require.ErrorIs(t, err, tasks.ErrMalformed)
			require.Equal(t, tc.column, re.Column)
			require.Contains(t, re.Reason, tc.reason)
			require.Equal(t, 1, re.Row)
		})
	}

	path := writeParquet(t, "bad.parquet", []hiddenRow{{Prompt: "P", Inputs: []string{"1", "2"}, Outputs: []string{"1"}}})
	_, _, err := tasks.LoadParquet(path, tasks.LoadConfig{})
	var re *tasks.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "outputs", re.Column)
	require.Contains(t, re.Reason, "1 outputs for 2 inputs")
}
