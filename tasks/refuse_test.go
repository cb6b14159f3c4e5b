package tasks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestLoadRefusesSourcesWithoutUsableTasks feeds the loaders the files an operator gets
// wrong (an empty file, the wrong column name, a dataset without tests): each is an
// error naming the file, never an empty list a program would replace with other tasks.
func TestLoadRefusesSourcesWithoutUsableTasks(t *testing.T) {
	type row struct {
		Question string `parquet:"question"`
		Tests    string `parquet:"tests,optional"`
	}
	tests := []struct {
		name    string
		jsonl   string // the file's content; parquet rows are the same rows
		rows    []row
		cfg     tasks.LoadConfig
		wantErr error
		wantMsg string // beside the file's name
	}{
		{name: "empty file", jsonl: "", wantErr: tasks.ErrNoTasks, wantMsg: "has no rows"},
		{name: "only blank lines", jsonl: "\n  \n\r\n", wantErr: tasks.ErrNoTasks, wantMsg: "has no rows"},
		{
			name: "task text in a column the loader does not read", jsonl: `{"question": "Q", "tests": "T"}`,
			rows: []row{{Question: "Q", Tests: "T"}}, wantErr: tasks.ErrNoTasks, wantMsg: `none of its 1 rows has task text (columns "prompt" or "task")`,
		},
		{
			name: "no task has tests", jsonl: "{\"question\": \"Q\"}\n{\"question\": \"R\"}",
			rows: []row{{Question: "Q"}, {Question: "R"}}, cfg: tasks.LoadConfig{PromptField: "question"},
			wantErr: tasks.ErrNoTests, wantMsg: "none of its 2 tasks has tests",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/jsonl", func(t *testing.T) {
			path := writeFile(t, "data.jsonl", tc.jsonl)
			ts, report, err := tasks.LoadJSONL(path, tc.cfg)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Nil(t, ts)
			assert.Equal(t, []string{path}, report.Files, "the report still says what was read")
		})
		if tc.rows == nil {
			continue
		}
		t.Run(tc.name+"/parquet", func(t *testing.T) {
			path := writeParquet(t, "data.parquet", tc.rows)
			ts, _, err := tasks.LoadParquet(path, tc.cfg)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Nil(t, ts)
		})
	}
}

func TestLoadAllowNoTestsKeepsTestlessTasks(t *testing.T) {
	path := writeFile(t, "data.jsonl", `{"prompt": "P"}`)
	ts, report, err := tasks.LoadJSONL(path, tasks.LoadConfig{AllowNoTests: true})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, 1, report.NoTests)

	// One task with tests is enough: the others are counted, not refused.
	path = writeFile(t, "mixed.jsonl", "{\"prompt\": \"P\"}\n{\"prompt\": \"Q\", \"tests\": \"T\"}")
	ts, report, err = tasks.LoadJSONL(path, tasks.LoadConfig{})
	require.NoError(t, err)
	assert.Len(t, ts, 2)
	assert.Equal(t, 1, report.NoTests)
}

// TestLoadHubRefusesASplitWithoutUsableTasks reads Hub splits over loopback HTTP whose
// shards hold no task, or no task with tests: an error naming the dataset, even though
// each shard is a readable Parquet file.
func TestLoadHubRefusesASplitWithoutUsableTasks(t *testing.T) {
	tests := []struct {
		name    string
		rows    []simpleRow
		wantErr error
	}{
		{name: "no task text", rows: []simpleRow{{"", "T"}}, wantErr: tasks.ErrNoTasks},
		{name: "no tests", rows: []simpleRow{{"P", ""}, {"Q", ""}}, wantErr: tasks.ErrNoTests},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hub := newFakeHub(t)
			hub.files["acme/empty/default/train"] = [][]byte{parquetBytes(t, tc.rows)}
			ts, _, err := tasks.LoadHub(context.Background(), tasks.HubConfig{
				Dataset: "acme/empty", CacheDir: t.TempDir(), BaseURL: hub.srv.URL + "/",
			})
			require.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), "hf:acme/empty")
			assert.Nil(t, ts)
		})
	}
}
