package testimage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// TestRootHasWhatARepositoryTestNeeds runs the root's own programs in it, through
// bubblewrap with the root as /.
func TestRootHasWhatARepositoryTestNeeds(t *testing.T) {
	root := testimage.Root(t)
	require.Equal(t, "root", filepath.Base(root))
	for _, p := range []string{"usr/bin/python3", "usr/bin/git", "usr/bin/patch", "usr/bin/bash", "etc/ssl/certs/ca-certificates.crt"} {
		require.FileExists(t, filepath.Join(root, p))
	}
	entries, err := os.ReadDir(filepath.Join(root, "dev"))
	require.NoError(t, err)
	require.Empty(t, entries, "/dev is the sandbox's to supply")

	for name, args := range map[string][]string{
		"pytest": {"/usr/bin/python3", "-c", "import pytest, sys; print(pytest.__version__, sys.version_info[:2])"},
		"git":    {"/usr/bin/git", "--version"},
		"patch":  {"/usr/bin/patch", "--version"},
	} {
		t.Run(name, func(t *testing.T) {
			bwrap := []string{"--unshare-all", "--die-with-parent", "--ro-bind", root, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--"}
			out, err := exec.Command("bwrap", append(bwrap, args...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
		})
	}
}
