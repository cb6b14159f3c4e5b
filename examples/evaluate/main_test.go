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
		{name: "eval size of a larger dataset", n: 12, want: "evaluating 10 tasks"},
		{name: "a dataset smaller than the eval size needs no train split", n: 3, want: "evaluating 3 tasks"},
		{name: "eval size 0: all of them", n: 12, args: []string{"-eval-size", "0"}, want: "evaluating 12 tasks"},
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
	clitest.CheckFlags(t, run, []string{"out", "vllm-url", "model", "tasks", "eval-size", "hf-token", "hf-cache", "seed"},
		[]clitest.BadLine{
			clitest.Bad("seed", "-seed", "-1"), clitest.Bad("nope", "-nope"),
			clitest.Bad("vllm-url", "-vllm-url", "localhost:8000"), clitest.Bad("eval-size", "-eval-size", "-1"),
			clitest.Bad("tasks", "-tasks", "tasks.csv"),
		})
}
