package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMinimalWritesOneValidGroup(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), nil, &out))
	n := 0
	require.NoError(t, atropos.ReadJSONL(&out, func(g *atropos.ScoredDataGroup) error {
		n++
		require.Equal(t, 4, g.Len())
		return g.Validate(atropos.ValidateOptions{})
	}))
	require.Equal(t, 1, n)
}

func TestMinimalFlags(t *testing.T) {
	clitest.CheckFlags(t, run, nil, []clitest.BadLine{clitest.Bad("x", "-x")})
	require.Error(t, run(context.Background(), []string{"extra"}, new(bytes.Buffer)))
}
