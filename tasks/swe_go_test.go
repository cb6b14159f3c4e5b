package tasks_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestLoadSWEGoToyTask reads the Go toy task of testdata/swe-go: go test -v, its log
// parser, the test ids go test prints (subtests included).
func TestLoadSWEGoToyTask(t *testing.T) {
	got, err := tasks.LoadSWE(filepath.Join("..", "testdata", "swe-go", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	read := func(name string) string {
		return string(readFile(t, filepath.Join("..", "testdata", "swe-go", "patches", name)))
	}
	want := &tasks.Repo{
		Image: tasks.DefaultImagePrefix + "sweb.eval.x86_64.agentic-opd_1776_swe-go-toy-1:latest", Name: "agentic-opd/swe-go-toy",
		Version: "0.1", BaseCommit: "06e9ffd9cc1bf3c3a1ef8c7064e494b121e7c135",
		TestPatch: read("reverse.test.patch"), GoldPatch: read("reverse.gold.patch"),
		TestCommand: "go test -v ./...", LogParser: tasks.ParserGoTest,
		FailToPass: []string{"TestReverseUnicode"},
		PassToPass: []string{"TestReverseASCII", "TestWords", "TestWords/simple", "TestWords/empty", "TestWords/spaces",
			"TestMean", "TestMedian", "TestMedian/3", "TestMedian/4"},
	}
	if diff := cmp.Diff(want, got[0].Repo); diff != "" {
		t.Errorf("repo (-want +got):\n%s", diff)
	}
	require.Equal(t, []string{"text/text_test.go"}, got[0].Repo.TestFiles())
}
