package imagestest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
)

// TestSWERef pulls the repository test image over HTTP and unpacks it: a Debian
// root with python3, pytest and git, the repository at /testbed on a commit, and
// the config SWEConfig says.
func TestSWERef(t *testing.T) {
	ref := imagestest.SWERef(t)
	dir, err := os.MkdirTemp("/var/tmp", "imagestest-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	defer os.RemoveAll(dir)
	c, err := images.NewCache(images.CacheConfig{Dir: dir})
	require.NoError(t, err)
	r, err := c.Root(context.Background(), ref)
	require.NoError(t, err)
	defer r.Release()
	// Another call, another registry: the same image, served from the cache.
	r2, err := c.Root(context.Background(), imagestest.SWERef(t))
	require.NoError(t, err)
	defer r2.Release()
	require.Equal(t, r.Dir, r2.Dir)
	require.Equal(t, images.Stats{Unpacks: 1, Hits: 1}, c.Stats())
	for _, p := range []string{"usr/bin/python3", "usr/bin/git", "testbed/.git/HEAD"} {
		require.FileExists(t, filepath.Join(r.Dir, p))
	}
	require.DirExists(t, filepath.Join(r.Dir, "usr/lib/python3/dist-packages/pytest"))
	want := imagestest.SWEConfig()
	if d := cmp.Diff(want, v1.Config{Env: r.Env, WorkingDir: r.WorkingDir, User: r.User}); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", filepath.Join(r.Dir, "testbed"), "rev-parse", "HEAD").CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile("../../testdata/swe/tasks.jsonl")
	require.NoError(t, err)
	var task struct {
		BaseCommit string `json:"base_commit"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader(b)).Decode(&task))
	require.Equal(t, task.BaseCommit, strings.TrimSpace(string(out)), "/testbed is at the toy tasks' base commit")
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
