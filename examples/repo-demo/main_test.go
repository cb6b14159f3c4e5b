package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRepoDemoRunsTheToyTaskEndToEnd runs the program as its doc says: the toy image
// built as an OCI layout, one group of two rollouts in sandboxes of it, graded: the
// fixing rollout resolves the task, the other does not.
func TestRepoDemoRunsTheToyTaskEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("repo-demo needs root: the toy image's root is built with mmdebstrap as root; CI runs as root")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", dir, "-image-cache", t.TempDir()}, &out), out.String())
	text := out.String()
	assert.True(t, strings.HasPrefix(text, "SIMULATOR: "), "the first line names the simulator: %s", text)
	assert.Regexp(t, `\ntoy image: oci-layout:`+regexp.QuoteMeta(filepath.Join(dir, "toy-image"))+`:swe-toy `, text)
	assert.Contains(t, text, "task agentic-opd__swe-toy-1: 2 rollouts")
	assert.Equal(t, 1, strings.Count(text, ": resolved, correctness 1.0"), text)
	assert.Len(t, regexp.MustCompile(`: unresolved, correctness 0\.2, score [0-9.]+, FAIL_TO_PASS failing: tests/test_arith\.py::test_add\n`).FindAllString(text, -1), 1, text)
	assert.Contains(t, text, "    hint: The check of add failed", "the judge's hint for the rollout that broke add")
	_, err := os.Stat(filepath.Join(dir, "toy-image", "index.json"))
	require.NoError(t, err, "the OCI layout")

	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	groups := 0
	require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		groups++
		assert.Len(t, g.Scores, 2)
		assert.NotEqual(t, g.Scores[0], g.Scores[1], "a fix and a failure score apart")
		return nil
	}))
	assert.Equal(t, 1, groups)
}

// TestRepoDemoSaysWhatIsMissing: without bubblewrap it stops before building
// anything, with the install command and what else it needs, as a setup error.
func TestRepoDemoSaysWhatIsMissing(t *testing.T) {
	old := cli.BwrapPath
	cli.BwrapPath = filepath.Join(t.TempDir(), "missing-bwrap")
	t.Cleanup(func() { cli.BwrapPath = old })
	dir := t.TempDir()
	err := run(context.Background(), []string{"-out", dir, "-image-cache", t.TempDir()}, new(bytes.Buffer))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "repository tasks run only in bubblewrap sandboxes of their images")
	assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends bubblewrap")
	assert.Contains(t, err.Error(), "run it as root, e.g. sudo go run ./examples/repo-demo")
	assert.Equal(t, 2, cli.ExitCode(err), "a setup error")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was built")
}

func TestRepoDemoFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"out", "group-size", "topk", "image-cache"},
		[]clitest.BadLine{clitest.Bad("group-size", "-group-size", "0"), clitest.Bad("topk", "-topk", "0")})
}
