package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-helper-image", "h", "-image", "i"}, // no kubeconfig
		{"-kubeconfig", "k"},                  // no images
		{"-kubeconfig", "k", "-helper-image", "h"},
		{"-kubeconfig", "k", "-helper-image", "h", "-image", "i", "-group-size", "0"},
		{"-no-such-flag"},
	} {
		t.Setenv("KUBECONFIG", "")
		err := run(context.Background(), args, &bytes.Buffer{})
		require.Equal(t, 2, cli.ExitCode(err), "%q: %v", args, err)
	}
	err := run(context.Background(), []string{"-kubeconfig", filepath.Join(t.TempDir(), "none"), "-helper-image", "h", "-image", "i"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "none")

	t.Setenv("KUBECONFIG", "")
	clitest.CheckFlags(t, run,
		[]string{"kubeconfig", "namespace", "helper-image", "image", "pull-policy", "tasks", "group-size",
			"trust-network-policy", "cpu", "memory", "out"},
		[]clitest.BadLine{clitest.Bad("kubeconfig"), clitest.Bad("helper-image", "-kubeconfig", "k"),
			clitest.Bad("group-size", "-kubeconfig", "k", "-helper-image", "h", "-image", "i", "-group-size", "0")})
}

// TestRunOnTheTestCluster runs the example as its README says, on the repository's
// test cluster (as root; skipped otherwise): the helper's image and the toy
// repository's are imported into the node, and one group of the toy task runs in
// pods, graded in pods: the fixing rollout resolves the task, the other does not.
func TestRunOnTheTestCluster(t *testing.T) {
	env := kubetest.Cluster(t)
	ctx := t.Context()
	dir := t.TempDir()
	helper := filepath.Join(dir, "agenticopd-pod")
	build := exec.CommandContext(ctx, "go", "build", "-o", helper, "github.com/agentic-opd/agenticopd/rollout/sandbox/kube/cmd/agenticopd-pod")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const helperImage, toyImage = "agenticopd.local/agenticopd-pod:example", "agenticopd.local/swe-toy:example"
	tar := filepath.Join(dir, "pod.tar")
	out, err = exec.CommandContext(ctx, helper, "image", "-o", tar, "-tag", helperImage).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, env.ImportImage(ctx, tar, helperImage))
	ref, err := name.ParseReference(imagestest.SWERef(t))
	require.NoError(t, err)
	img, err := remote.Image(ref, remote.WithContext(ctx))
	require.NoError(t, err)
	require.NoError(t, env.Import(ctx, img, toyImage))

	var stdout bytes.Buffer
	err = run(ctx, []string{"-kubeconfig", env.Kubeconfig, "-helper-image", helperImage, "-image", toyImage,
		"-pull-policy", "Never", "-tasks", filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"),
		"-out", dir}, &stdout)
	t.Log(stdout.String())
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(stdout.String(), ": resolved, correctness 1.0"), "the fixing rollout")
	require.Equal(t, 1, strings.Count(stdout.String(), ": unresolved, correctness 0.2"), "the wrong fix")
	require.True(t, strings.HasPrefix(stdout.String(), "kube: namespace default"))
}
