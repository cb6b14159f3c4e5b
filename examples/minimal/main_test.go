package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
)

// build compiles the program once per test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "minimal")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func TestMinimalWritesOneValidGroup(t *testing.T) {
	bin := build(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	n := 0
	require.NoError(t, atropos.ReadJSONL(&stdout, func(g *atropos.ScoredDataGroup) error {
		n++
		require.Equal(t, 4, g.Len())
		return g.Validate(atropos.ValidateOptions{})
	}))
	require.Equal(t, 1, n)

	// -h prints the usage and exits 0; an unknown flag is named, exit status 2.
	out, err := exec.Command(bin, "-h").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "Usage of")
	out, err = exec.Command(bin, "-groups", "2").CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(out), "-groups")
}

// TestREADMEProgramsAreTested: every Go block of the README and of docs/ is a file of
// the repository, verbatim, so it compiles and its tests run.
func TestREADMEProgramsAreTested(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	var blocks [][][]byte
	for _, name := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(name)
		require.NoError(t, err)
		blocks = append(blocks, regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(text, -1)...)
	}
	require.GreaterOrEqual(t, len(blocks), 2, "the README's program and docs/testing.md's test")
	files := map[string]string{}
	for _, name := range []string{"main.go", "readme_test.go"} {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		files[name] = string(b)
	}
	for _, b := range blocks {
		found := false
		for _, f := range files {
			found = found || strings.Contains(f, string(b[1]))
		}
		assert.True(t, found, "a Go block of the README or docs/ is not in examples/minimal verbatim:\n%s", b[1])
	}
}
