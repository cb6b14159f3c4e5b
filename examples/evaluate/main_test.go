package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

func TestEvaluateDataset(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.jsonl")
	var b strings.Builder
	for i := range 12 {
		b.WriteString(`{"task":"Write add(a, b) returning a+b, variant ` + string(rune('a'+i)) + `.","test_code":"from solution import add\nassert add(1, 2) == 3\nprint('All tests passed!')\n"}` + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", dir, "-dataset", path}, &out), out.String())
	assert.Contains(t, out.String(), "12 tasks")
	assert.Contains(t, out.String(), "evaluating 10 tasks", "eval_size 10 of 12")

	require.Error(t, run(context.Background(), []string{"-out", dir, "-dataset", filepath.Join(dir, "missing.jsonl")}, &out))
}

func TestEvaluateFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"out", "vllm-url", "model", "dataset", "seed"},
		[]clitest.BadLine{clitest.Bad("seed", "-seed", "-1"), clitest.Bad("nope", "-nope")})
}
