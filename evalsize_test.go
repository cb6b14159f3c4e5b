package agenticopd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestSmallDatasetTrainsWithNoEvalSplit gives NewEnv a dataset smaller than the default
// eval split: refused with the way out in the message, and accepted with NoEval.
func TestSmallDatasetTrainsWithNoEvalSplit(t *testing.T) {
	sim := vllmtest.NewServer(t)
	small := tasks.Builtin()[:3]
	tests := []struct {
		name     string
		evalSize int
		wantErr  error
		wantEval int
	}{
		{name: "default eval size: too small", wantErr: tasks.ErrDatasetTooSmall},
		{name: "one held out", evalSize: 1, wantEval: 1},
		{name: "none held out", evalSize: tasks.NoEval, wantEval: 0},
		{name: "another negative size", evalSize: -2, wantErr: agenticopd.ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), Dataset: small, EvalSize: tc.evalSize, SandboxFactory: memSandboxes})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Len(t, env.EvalTasks(), tc.wantEval)
		})
	}
}
