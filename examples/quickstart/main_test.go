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

	"github.com/agentic-opd/agenticopd/atropos"
)

func TestQuickstartWritesValidGroupsWithRows(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir, "-groups", "2", "-topk", "20"}, &out)
	require.NoError(t, err, out.String())
	first, _, _ := strings.Cut(out.String(), "\n")
	assert.Contains(t, first, "SIMULATOR", "the first line says the backend is a simulator")

	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	groups, rows := 0, 0
	require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		groups++
		require.NoError(t, g.Validate(atropos.ValidateOptions{}))
		for s := range g.Tokens {
			for p := range g.Tokens[s] {
				ids, lps := g.DistillRow(s, p)
				if len(ids) == 0 {
					continue
				}
				rows++
				assert.NotEqual(t, atropos.MaskIgnore, g.Masks[s][p], "row on a token the policy did not generate")
				assert.Len(t, ids, 20)
				assert.Len(t, lps, 20)
			}
		}
		return nil
	}))
	assert.Equal(t, 2, groups)
	assert.Positive(t, rows)
	assert.Contains(t, out.String(), "train/mean_reward")
}

func TestQuickstartRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), []string{"-groups", "0"}, &out))
	require.Error(t, run(context.Background(), []string{"-nope"}, &out))
}
