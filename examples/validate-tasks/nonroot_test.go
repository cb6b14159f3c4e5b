package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/testuser"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// imageRefEnv passes the test image's reference to a test run again as another user.
const imageRefEnv = "AGENTICOPD_TEST_IMAGE_REF"

// TestValidateWithoutRoot validates the toy tasks as an ordinary user (uid 1000):
// each is graded in image sandboxes as it is as root, and all three are valid.
func TestValidateWithoutRoot(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		// The registry is the calling process's: the pulls' connections close here.
		t.Cleanup(remote.DefaultTransport.(*http.Transport).CloseIdleConnections)
		out := filepath.Join(dir, "validation")
		var stdout bytes.Buffer
		err := run(context.Background(), []string{"-tasks", filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"),
			"-image", os.Getenv(imageRefEnv), "-image-cache", filepath.Join(dir, "images"), "-out", out}, &stdout)
		require.NoError(t, err, stdout.String())
		require.Contains(t, stdout.String(), "3 tasks, 3 valid, 0 failing")
		return
	}
	testuser.Run(t, testuser.Options{Env: []string{imageRefEnv + "=" + imagestest.SWERef(t)}})
}

// TestValidateRefusesAHostWithoutImageSandboxes runs validate-tasks as an ordinary
// user whose sandboxes' base directory is on a file system no overlay can be
// mounted on, as under a kernel without overlayfs in user namespaces: it stops
// before any task with the reason and exit status 2, and marks no task failing.
func TestValidateRefusesAHostWithoutImageSandboxes(t *testing.T) {
	if dir, ok := testuser.Dir(); ok {
		out := filepath.Join(dir, "validation")
		var stdout bytes.Buffer
		err := run(context.Background(), []string{"-tasks", filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"),
			"-image-cache", filepath.Join(dir, "images"), "-out", out}, &stdout)
		require.ErrorIs(t, err, bwrap.ErrImageUnsupported)
		require.ErrorIs(t, err, cli.ErrSetup)
		require.Equal(t, 2, cli.ExitCode(err))
		require.ErrorContains(t, err, "or run as root")
		require.NotContains(t, stdout.String(), "FAILING")
		require.NoFileExists(t, out)
		t.Logf("validate-tasks: %v (exit status %d)", err, cli.ExitCode(err))
		return
	}
	t.Log(testuser.Run(t, testuser.Options{Env: []string{"TMPDIR=" + testuser.NoOverlayDir(t)}}))
}
