package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestValidateToyTasks validates the toy tasks and two broken copies of the first:
// one whose gold patch is a wrong fix, one whose FAIL_TO_PASS test already passes.
func TestValidateToyTasks(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"))
	require.NoError(t, err)
	wrong, err := os.ReadFile(filepath.Join("..", "..", "testdata", "swe", "patches", "add.wrong.patch"))
	require.NoError(t, err)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(string(src), "\n", 2)[0]), &first))
	broken := func(id string, edit func(map[string]any)) string {
		row := map[string]any{}
		for k, v := range first {
			row[k] = v
		}
		row["instance_id"] = id
		edit(row)
		b, err := json.Marshal(row)
		require.NoError(t, err)
		return string(b) + "\n"
	}
	data := string(src) +
		broken("broken-gold", func(r map[string]any) { r["patch"] = string(wrong) }) +
		broken("already-passing", func(r map[string]any) { r["FAIL_TO_PASS"] = `["tests/test_arith.py::test_mul"]` })
	dir := t.TempDir()
	file := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(data), 0o644))
	out := filepath.Join(dir, "validation")

	var stdout bytes.Buffer
	err = run(context.Background(), []string{"-tasks", file, "-image", imagestest.SWERef(t), "-image-cache", t.TempDir(),
		"-concurrency", "2", "-out", out}, &stdout)
	require.ErrorIs(t, err, ErrInvalidTasks, stdout.String())
	require.Contains(t, stdout.String(), "5 tasks, 3 valid, 2 failing")
	require.Contains(t, stdout.String(), "[5/5 ")

	var got []failure
	b, err := os.ReadFile(filepath.Join(out, "failing-tasks.jsonl"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var f failure
		require.NoError(t, json.Unmarshal([]byte(line), &f))
		f.Reason = strings.SplitN(f.Reason, ":", 2)[0]
		got = append(got, f)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].InstanceID < got[j].InstanceID })
	want := []failure{
		{InstanceID: "already-passing", Check: "empty", Rule: "resolved", Reason: "the task is resolved without any change"},
		{InstanceID: "broken-gold", Check: "gold", Rule: "unresolved", Reason: "the gold patch does not resolve the task",
			F2PFailing: []string{"tests/test_arith.py::test_add"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failing tasks (-want +got):\n%s", diff)
	}
}

// TestValidateSWESmithAndHarborWithSpecs validates the repository's SWE-smith row and
// Harbor task, whose repository is in no built-in table: refused without -specs,
// valid with it.
func TestValidateSWESmithAndHarborWithSpecs(t *testing.T) {
	ref := imagestest.SWERef(t)
	cache := t.TempDir()
	for _, src := range []string{
		filepath.Join("..", "..", "testdata", "swe", "smith.jsonl"),
		filepath.Join("..", "..", "testdata", "harbor"),
	} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			out := t.TempDir()
			args := []string{"-tasks", src, "-image", ref, "-image-cache", cache, "-out", out}
			err := run(context.Background(), args, new(bytes.Buffer))
			require.ErrorIs(t, err, tasks.ErrUnknownRepo)
			require.ErrorContains(t, err, "a -specs file")

			var stdout bytes.Buffer
			args = append(args, "-specs", filepath.Join("..", "..", "testdata", "swe", "specs.json"))
			require.NoError(t, run(context.Background(), args, &stdout), stdout.String())
			require.Contains(t, stdout.String(), "1 tasks, 1 valid, 0 failing")
			b, err := os.ReadFile(filepath.Join(out, "failing-tasks.jsonl"))
			require.NoError(t, err)
			require.Empty(t, b)
		})
	}
}

func TestValidateFlags(t *testing.T) {
	prompt := filepath.Join(t.TempDir(), "prompt.jsonl")
	require.NoError(t, os.WriteFile(prompt, []byte(`{"prompt": "Write f.", "test_code": "assert True"}`+"\n"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "no tasks", args: nil, err: "-tasks \"\": must be a dataset of repository tasks"},
		{name: "builtin", args: []string{"-tasks", "builtin"}, err: "must be a dataset of repository tasks"},
		{name: "unknown source", args: []string{"-tasks", "x.csv"}, err: "FILE.jsonl, FILE.json, FILE.parquet"},
		{name: "no concurrency", args: []string{"-tasks", "x.jsonl", "-concurrency", "0"}, err: "concurrency"},
		{name: "tasks without a repository", args: []string{"-tasks", prompt}, err: "is not a repository task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out)
			require.ErrorContains(t, err, tc.err)
		})
	}
	clitest.CheckFlags(t, run,
		[]string{"tasks", "tasks-format", "specs", "image-cache", "hf-cache", "hf-token", "image", "concurrency", "out", "test-timeout"},
		[]clitest.BadLine{clitest.Bad("tasks"), clitest.Bad("concurrency", "-tasks", "x.jsonl", "-concurrency", "0"),
			clitest.Bad("tasks-format", "-tasks", "x.jsonl", "-tasks-format", "csv")})
}
