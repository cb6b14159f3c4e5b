package agenticopd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/internal/printcheck"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestErrorsNameEachLayerOnce fails rollouts where two layers wrap an error, as a
// program prints it: each layer's prefix appears once.
func TestErrorsNameEachLayerOnce(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("wording")))
	// A factory whose errors carry the sandbox package's own prefix, as bwrap's do.
	failing := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
		return nil, errors.New("sandbox: new: no space left on device")
	})
	plain := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
		return nil, errors.New("not for repository tasks")
	})
	swe, err := tasks.LoadSWE(filepath.Join("testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)

	for name, c := range map[string]struct {
		factory rollout.SandboxFactory
		task    tasks.Task
	}{
		"a factory's error":                {failing, tasks.Task{ID: "say", Statement: "Say done."}},
		"a repository task, plain factory": {plain, swe[0]},
	} {
		t.Run(name, func(t *testing.T) {
			env := fastEnv(t, sim.Client(), func(c2 *agenticopd.Config) { c2.SandboxFactory = c.factory; c2.DisableOPD = true })
			_, err := env.CollectGroup(context.Background(), c.task)
			require.Error(t, err)
			printed := "quickstart: " + err.Error()
			assert.Empty(t, printcheck.RepeatedPrefix(printed), printed)
			assert.Contains(t, printed, "task "+c.task.ID+":", "the task is named")
		})
	}
}

// TestProcessClosesThePageOfAFailedRun: when Process fails, the page at ReportPath is
// closed and says at its top that the run failed, and why.
func TestProcessClosesThePageOfAFailedRun(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("page")))
	failing := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
		return nil, errors.New("sandbox: new: no space left on device")
	})
	path := filepath.Join(t.TempDir(), "report.html")
	env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) { c.SandboxFactory = failing; c.ReportPath = path })
	var out strings.Builder
	err := env.Process(context.Background(), 2, &out)
	require.Error(t, err)
	page, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	text := string(page)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(text), "</html>"), "the page is closed")
	assert.Contains(t, text, "The run failed")
	assert.Contains(t, text, "0 of 2 groups written")
	assert.Contains(t, text, "no space left on device", "and why")
}
