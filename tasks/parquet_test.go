package tasks_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// hfRow has the columns of a typical Hugging Face coding dataset, all optional.
type hfRow struct {
	ID         *int64  `parquet:"id,optional"`
	Prompt     *string `parquet:"prompt,optional"`
	Task       *string `parquet:"task,optional"`
	TestCode   *string `parquet:"test_code,optional"`
	Tests      *string `parquet:"tests,optional"`
	Difficulty *string `parquet:"difficulty,optional"`
	Other      float64 `parquet:"other"`
}

func ptr[T any](v T) *T { return &v }

func writeParquet[T any](t *testing.T, name string, rows []T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, parquet.WriteFile(path, rows))
	return path
}

func TestLoadParquet(t *testing.T) {
	rows := []hfRow{
		{ID: ptr[int64](7), Prompt: ptr("P1"), TestCode: ptr("T1"), Difficulty: ptr("easy")},
		{Task: ptr("K2"), Tests: ptr("T2")},
		{Prompt: ptr(""), Task: ptr("K3")},
		{TestCode: ptr("orphan tests")},
		{Prompt: ptr("P5"), Task: ptr("K5"), TestCode: ptr("T5"), Tests: ptr("T5b"), Difficulty: ptr("")},
	}
	path := writeParquet(t, "train.parquet", rows)
	got, report, err := tasks.LoadParquet(path, tasks.LoadConfig{})
	require.NoError(t, err)
	py := tasks.LanguagePython
	want := []tasks.Task{
		{ID: "7", Statement: "P1", TestCode: "T1", Difficulty: "easy", Language: py},
		{ID: "train.parquet:2", Statement: "K2", TestCode: "T2", Difficulty: "unknown", Language: py},
		{ID: "train.parquet:3", Statement: "K3", Difficulty: "unknown", Language: py},
		{ID: "train.parquet:5", Statement: "P5", TestCode: "T5", Difficulty: "unknown", Language: py},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	wantReport := tasks.LoadReport{Files: []string{path}, Rows: 5, Loaded: 4, SkippedNoTask: 1, NoTests: 1}
	if diff := cmp.Diff(wantReport, report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	got, _, err = tasks.LoadParquet(path, tasks.LoadConfig{PromptField: "task"})
	require.NoError(t, err)
	// With PromptField "task" the prompt column is not read: row 1 has no task.
	require.Equal(t, []string{"train.parquet:2", "train.parquet:3", "train.parquet:5"}, ids(got))
	require.Equal(t, "K5", got[2].Statement)
}

func TestLoadParquetManyRows(t *testing.T) {
	type row struct {
		Prompt string `parquet:"prompt"`
		Tests  string `parquet:"tests"`
	}
	rows := make([]row, 1000)
	for i := range rows {
		rows[i] = row{Prompt: "p", Tests: "t"}
	}
	path := writeParquet(t, "big.parquet", rows)
	got, report, err := tasks.LoadParquet(path, tasks.LoadConfig{})
	require.NoError(t, err)
	require.Len(t, got, 1000)
	require.Equal(t, "big.parquet:1000", got[999].ID)
	require.Equal(t, 1000, report.Loaded)
}

func TestLoadParquetWrongTypes(t *testing.T) {
	type intPrompt struct {
		Prompt *int64 `parquet:"prompt,optional"`
	}
	type listTests struct {
		Prompt string   `parquet:"prompt"`
		Tests  []string `parquet:"tests,list"`
	}
	type floatID struct {
		Prompt string  `parquet:"prompt"`
		ID     float64 `parquet:"id"`
	}
	tests := []struct {
		name       string
		path       func(t *testing.T) string
		wantRow    int
		wantColumn string
		wantReason string
	}{
		{
			name: "integer prompt",
			path: func(t *testing.T) string {
				return writeParquet(t, "x.parquet", []intPrompt{{}, {}, {Prompt: ptr[int64](3)}})
			},
			wantRow: 3, wantColumn: "prompt", wantReason: "want a string, have a column of type INT64",
		},
		{
			name: "list tests",
			path: func(t *testing.T) string {
				return writeParquet(t, "x.parquet", []listTests{{Prompt: "p"}, {Prompt: "p", Tests: []string{"a"}}})
			},
			wantRow: 2, wantColumn: "tests", wantReason: "want a string, have a list of strings",
		},
		{
			name: "float id",
			path: func(t *testing.T) string {
				return writeParquet(t, "x.parquet", []floatID{{Prompt: "p", ID: 1.5}})
			},
			wantRow: 1, wantColumn: "id", wantReason: "want a string or an integer, have a column of type DOUBLE",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			_, _, err := tasks.LoadParquet(path, tasks.LoadConfig{})
			var re *tasks.RowError
			require.ErrorAs(t, err, &re)
			require.ErrorIs(t, err, tasks.ErrMalformed)
			want := &tasks.RowError{File: path, Row: tc.wantRow, Column: tc.wantColumn, Reason: tc.wantReason}
			if diff := cmp.Diff(want, re); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadParquetNullWrongTypeIsAbsent(t *testing.T) {
	type row struct {
		Prompt *int64 `parquet:"prompt,optional"`
		Task   string `parquet:"task"`
	}
	path := writeParquet(t, "x.parquet", []row{{Task: "K"}})
	got, _, err := tasks.LoadParquet(path, tasks.LoadConfig{AllowNoTests: true})
	require.NoError(t, err)
	require.Equal(t, "K", got[0].Statement)
}

func TestLoadParquetBadFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.parquet")
	_, _, err := tasks.LoadParquet(missing, tasks.LoadConfig{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), missing)

	notParquet := writeFile(t, "data.parquet", `{"prompt": "this is JSON"}`)
	_, _, err = tasks.LoadParquet(notParquet, tasks.LoadConfig{})
	require.ErrorContains(t, err, notParquet)
	require.ErrorContains(t, err, "not a readable Parquet file")

	// A footer length beyond the file (parquet-go would allocate it, up to 4 GiB).
	huge := writeFile(t, "huge.parquet", "PAR1"+strings.Repeat("x", 100)+"\xff\xff\xff\xf0PAR1")
	_, _, err = tasks.LoadParquet(huge, tasks.LoadConfig{})
	require.ErrorContains(t, err, huge)
	require.ErrorContains(t, err, "footer length 4043309055 exceeds the file size 112")

	// A real file cut short.
	good := writeParquet(t, "good.parquet", []hfRow{{Prompt: ptr("P")}})
	data := readFile(t, good)
	cut := writeFile(t, "cut.parquet", string(data[:len(data)/2]))
	_, _, err = tasks.LoadParquet(cut, tasks.LoadConfig{})
	require.ErrorContains(t, err, cut)
}

func FuzzLoadParquet(f *testing.F) {
	dir := f.TempDir()
	seed := func(rows any) []byte {
		path := filepath.Join(dir, "seed.parquet")
		switch r := rows.(type) {
		case []hfRow:
			require.NoError(f, parquet.WriteFile(path, r))
		case []simpleRow:
			require.NoError(f, parquet.WriteFile(path, r))
		}
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		return data
	}
	full := seed([]hfRow{{ID: ptr[int64](1), Prompt: ptr("P"), TestCode: ptr("T")}, {Task: ptr("K")}})
	f.Add(full)
	f.Add(full[:len(full)-9])
	f.Add(seed([]simpleRow{{"P", "T"}}))
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.parquet")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		ts, report, err := tasks.LoadParquet(path, tasks.LoadConfig{})
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(ts) != report.Loaded || report.Loaded+report.SkippedNoTask != report.Rows {
			t.Fatalf("report %+v does not add up with %d tasks", report, len(ts))
		}
	})
}
