package tasks_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestLoadJSONLColumnRules(t *testing.T) {
	py := tasks.LanguagePython
	tests := []struct {
		name       string
		cfg        tasks.LoadConfig
		lines      string
		want       []tasks.Task
		wantReport tasks.LoadReport
	}{
		{
			name:       "prompt, test_code, difficulty, id",
			lines:      `{"id": "a1", "prompt": "P", "test_code": "T", "difficulty": "hard"}`,
			want:       []tasks.Task{{ID: "a1", Statement: "P", TestCode: "T", Difficulty: "hard", Language: py}},
			wantReport: tasks.LoadReport{Rows: 1, Loaded: 1},
		},
		{
			name:       "fallback columns and defaults",
			lines:      `{"task": "K", "tests": "T2"}`,
			want:       []tasks.Task{{ID: "data.jsonl:1", Statement: "K", TestCode: "T2", Difficulty: "unknown", Language: py}},
			wantReport: tasks.LoadReport{Rows: 1, Loaded: 1},
		},
		{
			name:       "prompt wins over task, test_code over tests",
			lines:      `{"prompt": "P", "task": "K", "test_code": "T", "tests": "T2"}`,
			want:       []tasks.Task{{ID: "data.jsonl:1", Statement: "P", TestCode: "T", Difficulty: "unknown", Language: py}},
			wantReport: tasks.LoadReport{Rows: 1, Loaded: 1},
		},
		{
			name:  "empty or null prompt falls back to task",
			cfg:   tasks.LoadConfig{AllowNoTests: true},
			lines: "{\"prompt\": \"\", \"task\": \"K1\"}\n{\"prompt\": null, \"task\": \"K2\", \"difficulty\": null}",
			want: []tasks.Task{
				{ID: "data.jsonl:1", Statement: "K1", Difficulty: "unknown", Language: py},
				{ID: "data.jsonl:2", Statement: "K2", Difficulty: "unknown", Language: py},
			},
			wantReport: tasks.LoadReport{Rows: 2, Loaded: 2, NoTests: 2},
		},
		{
			name:  "custom prompt field",
			cfg:   tasks.LoadConfig{PromptField: "question", AllowNoTests: true},
			lines: "{\"question\": \"Q\", \"prompt\": \"P\"}\n{\"task\": \"K\"}",
			want: []tasks.Task{
				{ID: "data.jsonl:1", Statement: "Q", Difficulty: "unknown", Language: py},
				{ID: "data.jsonl:2", Statement: "K", Difficulty: "unknown", Language: py},
			},
			wantReport: tasks.LoadReport{Rows: 2, Loaded: 2, NoTests: 2},
		},
		{
			name:       "rows without a task are skipped and counted",
			cfg:        tasks.LoadConfig{AllowNoTests: true},
			lines:      "{\"prompt\": \"P\"}\n{\"test_code\": \"T\"}\n{\"prompt\": \"   \"}\n{\"task\": null}",
			want:       []tasks.Task{{ID: "data.jsonl:1", Statement: "P", Difficulty: "unknown", Language: py}},
			wantReport: tasks.LoadReport{Rows: 4, Loaded: 1, SkippedNoTask: 3, NoTests: 1},
		},
		{
			name:  "integer id, blank lines, CRLF and a byte order mark",
			cfg:   tasks.LoadConfig{AllowNoTests: true},
			lines: "\xef\xbb\xbf{\"id\": 42, \"prompt\": \"P\"}\r\n\r\n\n{\"prompt\": \"P2\", \"extra\": [1, {\"x\": 2}]}\r\n",
			want: []tasks.Task{
				{ID: "42", Statement: "P", Difficulty: "unknown", Language: py},
				{ID: "data.jsonl:4", Statement: "P2", Difficulty: "unknown", Language: py},
			},
			wantReport: tasks.LoadReport{Rows: 2, Loaded: 2, NoTests: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "data.jsonl", tc.lines)
			got, report, err := tasks.LoadJSONL(path, tc.cfg)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
			tc.wantReport.Files = []string{path}
			if diff := cmp.Diff(tc.wantReport, report); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadJSONLMalformed(t *testing.T) {
	good := `{"prompt": "P", "test_code": "T"}` + "\n"
	tests := []struct {
		name       string
		lines      string
		wantRow    int
		wantColumn string
		wantMsg    string
	}{
		{name: "bad JSON", lines: good + "{\"prompt\": \"P\",\n", wantRow: 2, wantMsg: "not a JSON object"},
		{name: "truncated string", lines: good + good + `{"prompt": "P`, wantRow: 3, wantMsg: "not a JSON object"},
		{name: "array line", lines: "[1, 2]\n", wantRow: 1, wantMsg: "not a JSON object"},
		{name: "null line", lines: "null\n", wantRow: 1, wantMsg: "not a JSON object: null"},
		{name: "text after the object", lines: good + `{"prompt": "P"} {"prompt": "Q"}`, wantRow: 2, wantMsg: "text after the JSON object"},
		{name: "number prompt", lines: `{"prompt": 3}`, wantRow: 1, wantColumn: "prompt", wantMsg: "want a string, have integer"},
		{name: "list tests", lines: good + good + good + `{"prompt": "P", "tests": ["a"]}`, wantRow: 4, wantColumn: "tests", wantMsg: "want a string, have array"},
		{name: "object test_code", lines: `{"prompt": "P", "test_code": {"a": 1}}`, wantRow: 1, wantColumn: "test_code", wantMsg: "have object"},
		{name: "boolean difficulty", lines: `{"prompt": "P", "difficulty": true}`, wantRow: 1, wantColumn: "difficulty", wantMsg: "have boolean"},
		{name: "fractional id", lines: `{"prompt": "P", "id": 1.5}`, wantRow: 1, wantColumn: "id", wantMsg: "want a string or an integer, have number"},
		{name: "wrong type even in a skipped row", lines: `{"prompt": "", "tests": 5}`, wantRow: 1, wantColumn: "tests", wantMsg: "have integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.jsonl", tc.lines)
			_, _, err := tasks.LoadJSONL(path, tasks.LoadConfig{})
			require.Error(t, err)
			require.ErrorIs(t, err, tasks.ErrMalformed)
			var re *tasks.RowError
			require.ErrorAs(t, err, &re)
			require.Equal(t, path, re.File)
			require.Equal(t, tc.wantRow, re.Row)
			require.Equal(t, tc.wantColumn, re.Column)
			require.Contains(t, re.Reason, tc.wantMsg)
			require.Contains(t, err.Error(), path)
			if tc.wantColumn != "" {
				require.Contains(t, err.Error(), `column "`+tc.wantColumn+`"`)
			}
		})
	}
}

func TestLoadJSONLMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	_, _, err := tasks.LoadJSONL(path, tasks.LoadConfig{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), path)
}

func TestReadJSONLLongLine(t *testing.T) {
	stmt := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	ts, _, err := tasks.ReadJSONL(strings.NewReader(`{"prompt": "`+stmt+`", "tests": "T"}`), "mem", tasks.LoadConfig{})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, stmt, ts[0].Statement)
}

func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"prompt": "P", "test_code": "T", "difficulty": "easy", "id": 3}`))
	f.Add([]byte("{\"task\": \"K\"}\n\n{\"tests\": [1]}\n"))
	f.Add([]byte("\xef\xbb\xbf{\"prompt\": null, \"task\": \"x\"}\r\n{"))
	f.Add([]byte(`{"id": 1e400, "prompt": "\ud800"}`))
	f.Add([]byte(`[] {} null "x" 1`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, report, err := tasks.ReadJSONL(bytes.NewReader(data), "fuzz", tasks.LoadConfig{})
		if errors.Is(err, tasks.ErrNoTasks) || errors.Is(err, tasks.ErrNoTests) {
			if !strings.Contains(err.Error(), "fuzz") || ts != nil {
				t.Fatalf("a refused source: %v (%d tasks)", err, len(ts))
			}
			return
		}
		if err != nil {
			var re *tasks.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if re.File != "fuzz" || re.Row < 1 || re.Reason == "" {
				t.Fatalf("row error without a place: %+v", re)
			}
			return
		}
		if len(ts) != report.Loaded || report.Loaded+report.SkippedNoTask != report.Rows {
			t.Fatalf("report %+v does not add up with %d tasks", report, len(ts))
		}
		for _, task := range ts {
			if strings.TrimSpace(task.Statement) == "" || task.ID == "" || task.Difficulty == "" || task.Language != tasks.LanguagePython {
				t.Fatalf("incomplete task %+v", task)
			}
		}
	})
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}
