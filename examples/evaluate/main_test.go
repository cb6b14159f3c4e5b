package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/images/imagestest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEvaluateWritesMetricsAndSamples(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", dir}, &out), out.String())
	assert.True(t, strings.HasPrefix(out.String(), "SIMULATOR"))

	var doc struct {
		Results map[string]map[string]float64 `json:"results"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	all := doc.Results["all"]
	assert.Equal(t, 2.0, all["eval/n_items"], "the built-in eval split has 2 tasks")
	assert.Contains(t, all, "eval/pass_rate")

	samples, err := os.ReadFile(filepath.Join(dir, "samples.jsonl"))
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(string(samples)), "\n"), 2)
}

// writeAddTasks writes n tasks with tests as a JSONL dataset in dir.
func writeAddTasks(t *testing.T, dir string, n int) string {
	path := filepath.Join(dir, "tasks.jsonl")
	var b strings.Builder
	for i := range n {
		b.WriteString(`{"task":"Write add(a, b) returning a+b, variant ` + string(rune('a'+i)) + `.","test_code":"from solution import add\nassert add(1, 2) == 3\nprint('All tests passed!')\n"}` + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func TestEvaluateDataset(t *testing.T) {
	tests := []struct {
		name string
		n    int
		args []string
		want string
	}{
		{name: "at most 10 tasks of a larger dataset", n: 12, want: "evaluating 10 tasks"},
		{name: "a small dataset needs no train split", n: 3, want: "evaluating 3 tasks"},
		{name: "max tasks 0: all of them", n: 12, args: []string{"-max-tasks", "0"}, want: "evaluating 12 tasks"},
		{name: "max tasks 5", n: 12, args: []string{"-max-tasks", "5"}, want: "evaluating 5 tasks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeAddTasks(t, dir, tc.n)
			var out bytes.Buffer
			require.NoError(t, run(context.Background(), append([]string{"-out", dir, "-tasks", path}, tc.args...), &out), out.String())
			assert.Regexp(t, `msg="tasks loaded" source=\S+ tasks=`+strconv.Itoa(tc.n), out.String())
			assert.Contains(t, out.String(), tc.want)
		})
	}
}

func TestEvaluateRefusesDatasetsWithoutUsableTasks(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for name, path := range map[string]string{"missing": filepath.Join(dir, "missing.jsonl"), "empty": empty} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"-out", dir, "-tasks", path}, &out)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), path, name)
		assert.NotContains(t, out.String(), "evaluating", name+": nothing ran, and never the built-in tasks")
	}
}

func TestEvaluateFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"out", "vllm-url", "model", "tasks", "tasks-format", "specs", "image", "image-cache", "max-tasks", "hf-token", "hf-cache", "seed"},
		[]clitest.BadLine{
			clitest.Bad("seed", "-seed", "-1"), clitest.Bad("nope", "-nope"),
			clitest.Bad("vllm-url", "-vllm-url", "localhost:8000"), clitest.Bad("max-tasks", "-max-tasks", "-1"),
			clitest.Bad("tasks-format", "-tasks-format", "csv"),
			clitest.Bad("tasks", "-tasks", "tasks.csv"),
		})
}

// TestEvaluateRepositoryTasks evaluates the repository's SWE-bench rows of the toy
// repository, recognised by their columns, in sandboxes of the toy image: the scripted
// student fixes "add" (resolved), the simulator's free sampling resolves nothing else.
func TestEvaluateRepositoryTasks(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir, "-tasks", filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"),
		"-image", imagestest.SWERef(t), "-image-cache", t.TempDir(), "-max-tasks", "0"}, &out)
	require.NoError(t, err, out.String())
	assert.Regexp(t, `msg="tasks loaded" source=\S+ tasks=3 format=swe rows=3 repository_tasks=3`, out.String())
	assert.Contains(t, out.String(), "evaluating 3 tasks")

	samples, err := os.ReadFile(filepath.Join(dir, "samples.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(samples)), "\n")
	require.Len(t, lines, 3)
	correctness := map[string]float64{}
	for _, l := range lines {
		var s struct {
			TaskID      string  `json:"task_id"`
			Correctness float64 `json:"correctness"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &s))
		correctness[s.TaskID] = s.Correctness
	}
	assert.Equal(t, 1.0, correctness["agentic-opd__swe-toy-1"], "the scripted student's fix of add is graded resolved")
	assert.Len(t, correctness, 3)
	for id, c := range correctness {
		if id != "agentic-opd__swe-toy-1" {
			assert.Less(t, c, 1.0, "%s: resolved without a fix", id)
		}
	}
}
