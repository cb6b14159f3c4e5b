package testimage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// inRoot runs args in root through bubblewrap, with root as / (read-only), a fresh
// /tmp and binds (pairs of a host directory and where it goes), and returns what it
// printed.
func inRoot(t *testing.T, root string, binds []string, args ...string) string {
	t.Helper()
	bwrap := []string{"--unshare-all", "--die-with-parent", "--ro-bind", root, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/tmp"}
	for i := 0; i+1 < len(binds); i += 2 {
		bwrap = append(bwrap, "--bind", binds[i], binds[i+1])
	}
	out, err := exec.Command("bwrap", append(append(bwrap, "--"), args...)...).CombinedOutput()
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
	return string(out)
}

// requireBaseTools checks what every variant has: git, patch, bash, CA certificates and
// an empty /dev.
func requireBaseTools(t *testing.T, root string) {
	t.Helper()
	require.Equal(t, "root", filepath.Base(root))
	for _, p := range []string{"usr/bin/git", "usr/bin/patch", "bin/bash", "etc/ssl/certs/ca-certificates.crt"} {
		require.FileExists(t, filepath.Join(root, p))
	}
	entries, err := os.ReadDir(filepath.Join(root, "dev"))
	require.NoError(t, err)
	require.Empty(t, entries, "/dev is the sandbox's to supply")
	inRoot(t, root, nil, "/usr/bin/git", "--version")
	inRoot(t, root, nil, "/usr/bin/patch", "--version")
}

// pythonVersion runs pytest on a passing test in root and returns python3's version
// (major, minor) and pytest's.
func pythonVersion(t *testing.T, root string) (major, minor int, pytest string) {
	t.Helper()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "test_toy.py"), []byte("def test_toy():\n    assert 1 + 1 == 2\n"), 0o644))
	out := inRoot(t, root, []string{src, "/tmp/src"}, "/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "/tmp/src/test_toy.py")
	require.Contains(t, out, "1 passed")
	out = inRoot(t, root, nil, "/usr/bin/python3", "-c", "import pytest, sys; print(*sys.version_info[:2], pytest.__version__)")
	f := strings.Fields(out)
	require.Len(t, f, 3, out)
	major, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	minor, err = strconv.Atoi(f[1])
	require.NoError(t, err)
	return major, minor, f[2]
}

// TestRootHasWhatARepositoryTestNeeds runs the root's own programs in it, through
// bubblewrap with the root as /.
func TestRootHasWhatARepositoryTestNeeds(t *testing.T) {
	root := testimage.Root(t)
	require.Equal(t, testimage.RootFor(t, testimage.Bookworm), root)
	requireBaseTools(t, root)
	require.FileExists(t, filepath.Join(root, "usr/bin/python3"))
	major, minor, _ := pythonVersion(t, root)
	require.Equal(t, []int{3, 11}, []int{major, minor}, "bookworm's python3")
}

// TestOldPythonRoot checks the OldPython root: a Python of the SWE-bench images'
// range (3.6 to 3.9) that runs pytest.
func TestOldPythonRoot(t *testing.T) {
	root := testimage.RootFor(t, testimage.OldPython)
	require.NotEqual(t, testimage.Root(t), root)
	requireBaseTools(t, root)
	major, minor, pytest := pythonVersion(t, root)
	require.Equal(t, 3, major)
	require.True(t, minor >= 6 && minor <= 9, "python3 is 3.%d, want 3.6 to 3.9", minor)
	require.True(t, strings.HasPrefix(pytest, "6."), "pytest %s, want bullseye's 6.x", pytest)
	t.Logf("python %d.%d, pytest %s", major, minor, pytest)
}

// TestGolangRoot checks the Golang root: go runs, and go test passes a module's test
// that links the standard library's cgo packages (net, os/user), as a repository's
// would.
func TestGolangRoot(t *testing.T) {
	root := testimage.RootFor(t, testimage.Golang)
	requireBaseTools(t, root)
	require.FileExists(t, filepath.Join(root, "usr/lib/go-1.19/bin/go"))
	require.NoFileExists(t, filepath.Join(root, "usr/bin/python3"), "the Go root has no python")
	out := inRoot(t, root, nil, "/usr/bin/go", "version")
	require.Regexp(t, regexp.MustCompile(`^go version go1\.19(\.\d+)? linux/`), out)

	src := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":      "module example.com/toy\n\ngo 1.19\n",
		"toy.go":      "package toy\n\nfunc Add(a, b int) int { return a + b }\n",
		"toy_test.go": "package toy\n\nimport (\n\t\"net\"\n\t\"os/user\"\n\t\"testing\"\n)\n\nfunc TestAdd(t *testing.T) {\n\t_, _ = user.Current()\n\t_ = net.ParseIP(\"127.0.0.1\")\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"1+2\")\n\t}\n}\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o644))
	}
	out = inRoot(t, root, []string{src, "/tmp/src"}, "/bin/sh", "-c", "cd /tmp/src && go test -count=1 -v ./...")
	require.Contains(t, out, "--- PASS: TestAdd")
}

func TestVariantNames(t *testing.T) {
	for v, want := range map[testimage.Variant]string{
		testimage.Bookworm:   "bookworm",
		testimage.OldPython:  "oldpython",
		testimage.Golang:     "golang",
		testimage.Variant(7): "Variant(7)",
	} {
		require.Equal(t, want, v.String())
	}
	var zero testimage.Variant
	require.Equal(t, testimage.Bookworm, zero, "the zero value is the default root")
	require.Regexp(t, `^oldpython-[0-9a-f]{16}$`, testimage.Key(testimage.OldPython))
	_, err := testimage.Ensure(context.Background(), t.TempDir(), testimage.Variant(7))
	require.ErrorContains(t, err, "unknown variant Variant(7)")
}
