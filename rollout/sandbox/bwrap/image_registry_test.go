package bwrap_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// TestImageSandboxFromRegistry runs the toy repository's tests in a sandbox over the
// real test image, pulled over HTTP from a registry into an image cache: the
// working directory an overlay (no copy), git and pytest working there as root.
func TestImageSandboxFromRegistry(t *testing.T) {
	cache, err := images.NewCache(images.CacheConfig{Dir: reachableDir(t)})
	require.NoError(t, err)
	f := newFactory(t, bwrap.Config{Images: cache})
	ref := imagestest.SWERef(t)
	for i := range 2 { // the second sandbox reuses the unpacked root
		sb := newImageSandbox(t, f, rollout.SandboxSpec{Image: ref})
		require.False(t, bwrap.ImageCopied(sb), "the working directory is an overlay")
		require.Equal(t, "/testbed", sb.Dir())
		res := run(t, sb, "id -u && git status --porcelain && git log --oneline | wc -l && python3 -B -m pytest -q -p no:cacheprovider >/dev/null; echo pytest=$?", time.Minute)
		require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
		require.Equal(t, "0\n1\npytest=0\n", string(res.Stdout), "sandbox %d; stderr %s", i, res.Stderr)
	}
	require.Equal(t, int64(1), cache.Stats().Unpacks)
}
