package kubetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/internal/kubetest"
	"github.com/agentic-opd/agenticopd/internal/kubetest/binimage"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// toolImage is the image the test builds and imports: the pause program at another path;
// toolTarImage is the same image imported from a docker-archive tarball.
const (
	toolImage    = "agenticopd.local/kubetest-tool:1"
	toolTarImage = "agenticopd.local/kubetest-tool:tar"
)

// TestCluster brings the cluster up, runs pods of an image built here and imported from an
// OCI layout, execs in them through the API server, breaks a memory limit, and takes the
// cluster down again, checking that the machine is as it was before.
func TestCluster(t *testing.T) {
	// The machine as it is before up, with the lock held: not while another process's
	// cluster runs.
	var before *machine
	var snapErr error
	defer kubetest.SetBeforeUp(func() { before, snapErr = snapshot() })()
	env := kubetest.Cluster(t)
	require.NoError(t, snapErr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)

	img, err := binimage.New(env.PauseProgram, "/bin/tool")
	require.NoError(t, err)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	require.NoError(t, err)
	require.NoError(t, p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "tool"})))
	t0 := time.Now()
	require.NoError(t, env.ImportImage(ctx, "oci-layout:"+dir+":tool", toolImage))
	t.Logf("image imported in %v", time.Since(t0).Round(time.Millisecond))

	t.Run("exec", func(t *testing.T) {
		t0 := time.Now()
		pod := runPod(ctx, t, cs, pod("exec", false))
		t.Logf("pod running in %v", time.Since(t0).Round(time.Millisecond))

		t0 = time.Now()
		out, err := execIn(ctx, env, cs, pod, "/bin/tool", "echo", "hello", "pod")
		require.NoError(t, err)
		require.Equal(t, "hello pod\n", out)
		t.Logf("exec in %v", time.Since(t0).Round(time.Millisecond))

		// The pod's network is its own loopback and nothing else.
		out, err = execIn(ctx, env, cs, pod, "/bin/tool", "cat", "/proc/net/dev")
		require.NoError(t, err)
		require.Equal(t, []string{"lo"}, interfaces(out), "/proc/net/dev:\n%s", out)

		_, err = execIn(ctx, env, cs, pod, "/bin/tool", "exit", "3")
		var exit exec.ExitError
		require.True(t, errors.As(err, &exit), "exit 3: %v", err)
		require.Equal(t, 3, exit.ExitStatus())
	})

	t.Run("docker archive", func(t *testing.T) {
		tag, err := name.NewTag(toolImage)
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "tool.tar")
		require.NoError(t, tarball.WriteToFile(file, tag, img))
		require.NoError(t, env.ImportImage(ctx, file, toolTarImage))
		p := pod("archive", false)
		p.Spec.Containers[0].Image = toolTarImage
		runPod(ctx, t, cs, p)
	})

	t.Run("host network", func(t *testing.T) {
		pod := runPod(ctx, t, cs, pod("hostnet", true))
		out, err := execIn(ctx, env, cs, pod, "/bin/tool", "cat", "/proc/net/dev")
		require.NoError(t, err)
		require.Contains(t, interfaces(out), "lo")
	})

	t.Run("memory limit", func(t *testing.T) {
		p := pod("oom", false)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		c := &p.Spec.Containers[0]
		c.Command = []string{"/bin/tool", "alloc", "256"}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		var term *corev1.ContainerStateTerminated
		waitFor(ctx, t, "the container's end", func() (bool, error) {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || len(got.Status.ContainerStatuses) == 0 {
				return false, err
			}
			term = got.Status.ContainerStatuses[0].State.Terminated
			return term != nil, nil
		})
		require.Equal(t, "OOMKilled", term.Reason, "%+v", term)
	})

	t.Run("down", func(t *testing.T) {
		if before == nil {
			t.Skipf("the cluster was started by %s: not this test's to take down", env.Owner)
		}
		t0 := time.Now()
		require.NoError(t, kubetest.Down(ctx))
		t.Logf("down in %v", time.Since(t0).Round(time.Millisecond))
		after, err := snapshot()
		require.NoError(t, err)
		if err := before.diff(after, env.Work); err != nil {
			t.Errorf("the machine after down differs from before up:\n%v", err)
		}
	})
}

func pod(name string, hostNetwork bool) *corev1.Pod {
	no, grace := false, int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   hostNetwork,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "c",
				Image:           toolImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/tool"},
			}},
		},
	}
}

// runPod creates p and waits until it runs.
func runPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(ctx, t, "pod "+p.Name+" running", func() (bool, error) {
		got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended: %+v", p.Name, got.Status)
		}
		p = got
		return got.Status.Phase == corev1.PodRunning, nil
	})
	return p
}

// waitFor calls cond every 100 ms until it is true, fails, or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		require.NoError(t, err, what)
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// execIn runs cmd in p's container through the API server (WebSocket, then SPDY) and returns
// its standard output; a command that exits non-zero gives an exec.ExitError.
func execIn(ctx context.Context, env *kubetest.Env, cs kubernetes.Interface, p *corev1.Pod, cmd ...string) (string, error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: p.Spec.Containers[0].Name, Command: cmd, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(env.Config, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(env.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil && stderr.Len() > 0 {
		err = fmt.Errorf("%w (stderr: %s)", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), err
}

// interfaces are the names /proc/net/dev lists.
func interfaces(procNetDev string) []string {
	var names []string
	for _, l := range strings.Split(procNetDev, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && !strings.Contains(name, "|") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}
