package reward_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// overBudget is a sandbox whose workspace the agent made too deep or too large to
// restore in time.
type overBudget struct{ *dirSandbox }

func (overBudget) Restore(context.Context) error {
	return fmt.Errorf("sandbox: restore: %w", rollout.ErrRestoreBudget)
}

// TestVerifyRestoreOverBudgetIsTheSolutionsFault: a tree the restore cannot walk in
// time is the agent's doing, scored, never an error that fails the group.
func TestVerifyRestoreOverBudgetIsTheSolutionsFault(t *testing.T) {
	sb := overBudget{&dirSandbox{dir: t.TempDir()}}
	v, err := reward.Verify(context.Background(), sb, dirFactory{t}, tasks.Builtin()[0], reward.VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, reward.RuleSolutionFault, v.Rule)
	require.Equal(t, 0.1, v.Correctness)
	require.True(t, v.SandboxFault)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = reward.Verify(ctx, sb, dirFactory{t}, tasks.Builtin()[0], reward.VerifyOptions{})
	require.Error(t, err, "a context that ended is the caller's, not the solution's")
}
