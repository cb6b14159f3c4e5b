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

	"github.com/agentic-opd/agenticopd/images/imagestest"
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
	out := filepath.Join(dir, "failing.jsonl")

	var stdout bytes.Buffer
	err = run(context.Background(), []string{"-tasks", file, "-image", imagestest.SWERef(t), "-image-cache", t.TempDir(),
		"-concurrency", "2", "-out", out}, &stdout)
	require.ErrorIs(t, err, ErrInvalidTasks, stdout.String())
	require.Contains(t, stdout.String(), "5 tasks, 3 valid, 2 failing")
	require.Contains(t, stdout.String(), "[5/5 ")

	var got []failure
	b, err := os.ReadFile(out)
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

func TestValidateFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "no tasks", args: nil, err: "required"},
		{name: "unknown source", args: []string{"-tasks", "x.csv"}, err: "FILE.jsonl, FILE.parquet"},
		{name: "no concurrency", args: []string{"-tasks", "x.jsonl", "-concurrency", "0"}, err: "concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
