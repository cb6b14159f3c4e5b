package reward_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/printcheck"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// TestVerifyPatchNamesTheSandboxOnce: a factory's error that carries the sandbox
// package's prefix is not given a second one.
func TestVerifyPatchNamesTheSandboxOnce(t *testing.T) {
	failing := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
		return nil, errors.New("sandbox: image x: not in the cache")
	})
	task := tasks.Task{ID: "t", Repo: &tasks.Repo{Image: "x"}}
	v, err := reward.VerifyPatch(context.Background(), failing, task, "", reward.RepoOptions{})
	require.Error(t, err)
	assert.Equal(t, reward.RuleSandboxError, v.Rule)
	assert.Empty(t, printcheck.RepeatedPrefix(err.Error()), err.Error())
}
