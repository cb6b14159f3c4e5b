package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quickstart runs the program offline into a new directory and returns the
// directory and what it printed, with the directory's path and the first line (the
// simulators' loopback URLs, whose ports the kernel picks) taken out.
func quickstart(t *testing.T, args ...string) (dir, printed string) {
	t.Helper()
	dir = t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"-out", dir, "-topk", "20"}, args...), &out), out.String())
	_, rest, ok := strings.Cut(out.String(), "\n")
	require.True(t, ok)
	return dir, strings.ReplaceAll(rest, dir, "OUT")
}

// TestQuickstartSameSeedSameOutput: two offline runs with the same -seed write the
// same bytes to groups.jsonl and report.html and print the same lines, though their
// groups are collected concurrently and finish in any order; another seed writes
// other groups.
func TestQuickstartSameSeedSameOutput(t *testing.T) {
	args := []string{"-groups", "4", "-seed", "1"}
	dirA, outA := quickstart(t, args...)
	dirB, outB := quickstart(t, args...)
	for _, name := range []string{"groups.jsonl", "report.html"} {
		a, err := os.ReadFile(filepath.Join(dirA, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dirB, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "%s differs between two runs with -seed 1", name)
	}
	assert.Equal(t, outA, outB, "the printed groups and metrics")
	assert.Equal(t, 4, strings.Count(outA, "\ngroup: task "))

	dirC, _ := quickstart(t, "-groups", "4", "-seed", "2")
	a, err := os.ReadFile(filepath.Join(dirA, "groups.jsonl"))
	require.NoError(t, err)
	c, err := os.ReadFile(filepath.Join(dirC, "groups.jsonl"))
	require.NoError(t, err)
	assert.False(t, bytes.Equal(a, c), "another seed, other groups")
}
