package imagestest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
)

// TestSWEOldPythonRef pulls the older-Python repository image over HTTP, unpacks it
// and runs its python3 and pytest through bubblewrap: a Python of the SWE-bench
// images' range, and the toy repository's tests collected at /testbed.
func TestSWEOldPythonRef(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "imagestest-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	defer os.RemoveAll(dir)
	c, err := images.NewCache(images.CacheConfig{Dir: dir})
	require.NoError(t, err)
	r, err := c.Root(context.Background(), imagestest.SWEOldPythonRef(t))
	require.NoError(t, err)
	defer r.Release()
	if d := cmp.Diff(imagestest.SWEConfig(), v1.Config{Env: r.Env, WorkingDir: r.WorkingDir, User: r.User}); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	require.FileExists(t, filepath.Join(r.Dir, "testbed/.git/HEAD"))

	run := func(args ...string) string {
		t.Helper()
		bwrap := []string{"--unshare-all", "--die-with-parent", "--ro-bind", r.Dir, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--chdir", "/testbed", "--"}
		out, err := exec.Command("bwrap", append(bwrap, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	m := regexp.MustCompile(`^Python 3\.(\d+)\.\d+\n$`).FindStringSubmatch(run("python3", "--version"))
	require.NotNil(t, m, "python3 --version")
	minor, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.LessOrEqual(t, minor, 9, "python3 is 3.%d, want 3.9 or older", minor)
	out := run("python3", "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q")
	require.Regexp(t, `tests/test_arith\.py::test_mul`, out)
	require.Regexp(t, `(?m)^platform linux -- Python 3\.\d+\.\d+, pytest-6\.`, run("python3", "-m", "pytest", "-p", "no:cacheprovider", "--collect-only"))
}
