package agenticopd_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/internal/testuser"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestNewEnvRefusesImagesTheHostCannotRun runs NewEnv with Images as an ordinary user
// whose temporary directory (the default sandboxes' base) is on a file system no
// overlay can be mounted on, as under a kernel without overlayfs in user namespaces:
// NewEnv refuses at once with the reason, where before the first repository rollout
// failed, and every task with it.
func TestNewEnvRefusesImagesTheHostCannotRun(t *testing.T) {
	if _, ok := testuser.Dir(); ok {
		sim := vllmtest.NewServer(t)
		cfg := agenticopd.Config{Policy: sim.Client(), DisableOPD: true, EvalSize: tasks.NoEval}
		_, err := agenticopd.NewEnv(cfg)
		require.NoError(t, err, "without Images nothing is probed")
		cache, err := images.NewCache(images.CacheConfig{Dir: os.Getenv("HOME")})
		require.NoError(t, err)
		cfg.Images = cache
		_, err = agenticopd.NewEnv(cfg)
		require.ErrorIs(t, err, bwrap.ErrImageUnsupported)
		require.ErrorContains(t, err, "agenticopd: default sandbox: sandbox: this host cannot run image sandboxes")
		require.ErrorContains(t, err, "or run as root")
		return
	}
	testuser.Run(t, testuser.Options{Env: []string{"TMPDIR=" + testuser.NoOverlayDir(t)}})
}
