package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeOfflineFeedsTheTrainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-steps", "2", "-group-size", "2", "-batch-size", "4", "-spool", t.TempDir()}, &out), out.String())
	text := out.String()
	first, _, _ := strings.Cut(text, "\n")
	assert.Contains(t, first, "SIMULATOR")
	assert.Contains(t, text, "trainer: step 1:")
	assert.Contains(t, text, "trainer: step 2:")
	assert.Contains(t, text, "env: the trainer has every step it asked for")
}

func TestServeRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), []string{"-batch-size", "1", "-group-size", "4"}, &out))
}
