package podproto_test

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// serve exits on its own once no call has come for its idle time (the pod then
// ends itself).
func TestServeIdleExit(t *testing.T) {
	cmd := exec.Command(helperBin, podproto.OpServe, "-idle", "100ms")
	cmd.Env = append(os.Environ(), "AGENTICOPD_POD_STATE="+t.TempDir())
	out, err := cmd.CombinedOutput() // returns only when serve exits
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "no call for 100ms")
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(helperBin, podproto.OpInstall, dir).CombinedOutput()
	require.NoError(t, err, string(out))
	fi, err := os.Stat(filepath.Join(dir, filepath.Base(podproto.HelperPath)))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

// image writes a docker archive holding one layer with the helper at
// /agenticopd-pod and the install entrypoint.
func TestImage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pod.tar")
	b, err := exec.Command(helperBin, "image", "-o", out, "-tag", "agenticopd/pod:test").CombinedOutput()
	require.NoError(t, err, string(b))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = data
	}
	require.NoError(t, json.Unmarshal(files["manifest.json"], &manifest))
	require.Len(t, manifest, 1)
	require.Len(t, manifest[0].Layers, 1)
	var cfg struct {
		OS     string                        `json:"os"`
		Config struct{ Entrypoint []string } `json:"config"`
	}
	require.NoError(t, json.Unmarshal(files[manifest[0].Config], &cfg))
	require.Equal(t, []string{podproto.HelperImagePath, podproto.OpInstall, podproto.HelperDir}, cfg.Config.Entrypoint)
	require.Equal(t, "linux", cfg.OS)
	require.True(t, strings.HasSuffix(manifest[0].RepoTags[0], "agenticopd/pod:test"), manifest[0].RepoTags)
}
