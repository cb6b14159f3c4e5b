package kube_test

// Tests on a real single-node cluster (internal/kubetest): skipped unless the
// process runs as root and AGENTICOPD_KUBE is not "off".

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/kubetest"
	"github.com/agentic-opd/agenticopd/internal/testimage"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
)

// Local image names the cluster tests import (no registry is involved).
const (
	realHelperImage = "agenticopd.local/agenticopd-pod:test"
	realTaskImage   = "agenticopd.local/kube-test-root:1"
	realNamespace   = "default"
)

// childEnv marks the re-executed test binary that plays an env process.
const childEnv = "AGENTICOPD_KUBE_TEST_CHILD"

var realImages struct {
	once sync.Once
	err  error
}

// realCluster returns the test cluster with the helper's image and a Debian task
// image (python3, coreutils) imported.
func realCluster(t testing.TB) *kubetest.Env {
	t.Helper()
	env := kubetest.Cluster(t)
	realImages.once.Do(func() {
		ctx := context.Background()
		tar := filepath.Join(filepath.Dir(helperBin), "helper-image.tar")
		out, err := exec.Command(helperBin, "image", "-o", tar, "-tag", realHelperImage).CombinedOutput()
		if err != nil {
			realImages.err = fmt.Errorf("agenticopd-pod image: %v: %s", err, out)
			return
		}
		if err := env.ImportImage(ctx, tar, realHelperImage); err != nil {
			realImages.err = err
			return
		}
		layer, err := imagestest.DirLayer(testimage.Root(t))
		if err != nil {
			realImages.err = err
			return
		}
		img, err := imagestest.ImageOf(v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}, layer)
		if err != nil {
			realImages.err = err
			return
		}
		realImages.err = env.Import(ctx, img, realTaskImage)
	})
	if realImages.err != nil {
		t.Fatalf("importing the test images: %v", realImages.err)
	}
	return env
}

func realConfig(env *kubetest.Env) kube.Config {
	return kube.Config{
		REST:            env.Config,
		Namespace:       realNamespace,
		HelperImage:     realHelperImage,
		Image:           realTaskImage,
		ImagePullPolicy: corev1.PullNever,
		Limits:          kube.Limits{CPU: "200m", Memory: "256Mi", EphemeralStorage: "1Gi"},
		LeaseDuration:   3 * time.Second,
	}
}

func realFactory(t *testing.T, mod func(*kube.Config)) *kube.Factory {
	t.Helper()
	env := realCluster(t)
	cfg := realConfig(env)
	if mod != nil {
		mod(&cfg)
	}
	start := time.Now()
	f, err := kube.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("New (with its probe pod): %v; network %v: %s", time.Since(start), f.Enforcement().Network, f.Enforcement().NetworkDetail)
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

func TestClusterConformance(t *testing.T) {
	f := realFactory(t, nil)
	if got := f.Enforcement().Network; got != kube.NetworkLoopbackOnly {
		t.Errorf("the test cluster's pods have only loopback; the probe says %v", got)
	}
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox {
		start := time.Now()
		sb, err := f.NewSandbox(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod start: %v", time.Since(start))
		return sb
	})
}

// TestClusterMemoryLimit: a command that breaks the memory limit is the agent's
// fault: a result (the OOM killer's 137), or the sandbox ended with EndMemory
// where the node kills the whole container; never an error.
func TestClusterMemoryLimit(t *testing.T) {
	f := realFactory(t, nil)
	sb, err := f.NewSandbox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(t.Context(), rollout.Command{Shell: `python3 -c "b = bytearray(1 << 30); print(len(b))"`, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Run = %v; a memory breach must be a result", err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("1 GiB allocated under a 256 MiB limit: %+v", res)
	}
	t.Logf("exit %d, ended %q, stderr %q", res.ExitCode, sb.(*kube.Sandbox).Ended(), res.Stderr)
	// The sandbox is either alive (one process killed) or ended as memory.
	if e := sb.(*kube.Sandbox).Ended(); e != "" && e != kube.EndMemory {
		t.Errorf("Ended = %q", e)
	}
}

// BenchmarkClusterExec measures one command's round trip on a real pod.
func BenchmarkClusterExec(b *testing.B) {
	env := realCluster(b)
	cfg := realConfig(env)
	f, err := kube.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sb, err := f.NewSandbox(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	var lat []time.Duration
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		s := time.Now()
		if _, err := sb.Run(context.Background(), rollout.Command{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(len(lat))
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000, "client-cpu-ms/op")
}

// TestClusterKilledEnv: an env process SIGKILLed mid-group leaves pods that end
// themselves after the idle time, and objects the next factory's start removes.
func TestClusterKilledEnv(t *testing.T) {
	env := realCluster(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestClusterEnvProcess$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"="+env.Kubeconfig)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var lease string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "LEASE "); ok {
			lease = l
		}
		if sc.Text() == "READY" {
			break
		}
	}
	if lease == "" || sc.Text() != "READY" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the env process did not start its group")
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	go func() { _, _ = bufioDrain(sc) }()
	_ = child.Wait()
	killed := time.Now()
	sel := kube.LabelOwner + "=" + lease
	running := func() int {
		pods, err := cs.CoreV1().Pods(realNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
				n++
			}
		}
		return n
	}
	if n := running(); n == 0 {
		t.Fatal("no pod of the killed env process runs right after the kill")
	}
	for running() > 0 {
		select {
		case <-ctx.Done():
			t.Fatal("pods of the killed env process still run")
		case <-time.After(time.Second):
		}
	}
	t.Logf("0 running pods %v after the SIGKILL (IdleExit 20s)", time.Since(killed))
	// The next factory's start sweeps what is left, once the Lease has expired
	// (three durations of 3 s).
	for {
		l, err := cs.CoordinationV1().Leases(realNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || time.Since(l.Spec.RenewTime.Time) > 10*time.Second {
			break
		}
		time.Sleep(time.Second)
	}
	f, err := kube.New(ctx, realConfig(env))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pods, _ := cs.CoreV1().Pods(realNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	leases, _ := cs.CoordinationV1().Leases(realNamespace).List(ctx, metav1.ListOptions{})
	pols, _ := cs.NetworkingV1().NetworkPolicies(realNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	var left []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			left = append(left, "pod "+p.Name)
		}
	}
	for _, l := range leases.Items {
		if l.Name == lease {
			left = append(left, "lease "+l.Name)
		}
	}
	for _, p := range pols.Items {
		left = append(left, "networkpolicy "+p.Name)
	}
	if len(left) > 0 {
		t.Errorf("left after the next factory's start: %v", left)
	}
}

func bufioDrain(sc *bufio.Scanner) (int, error) {
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// TestClusterEnvProcess is the env process TestClusterKilledEnv re-executes and
// kills: a factory, four sandboxes each running a long command (a group in
// flight), then it waits to be killed.
func TestClusterEnvProcess(t *testing.T) {
	kubeconfig := os.Getenv(childEnv)
	if kubeconfig == "" {
		t.Skip("run by TestClusterKilledEnv")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kube.Config{REST: rc, Namespace: realNamespace, HelperImage: realHelperImage, Image: realTaskImage,
		ImagePullPolicy: corev1.PullNever, LeaseDuration: 3 * time.Second, IdleExit: 20 * time.Second,
		Limits: kube.Limits{CPU: "100m", Memory: "128Mi", EphemeralStorage: "1Gi"}}
	f, err := kube.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LEASE %s\n", f.Lease())
	for range 4 {
		sb, err := f.NewSandbox(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = sb.Run(context.Background(), rollout.Command{Shell: "sleep 600", Timeout: time.Hour}) }()
	}
	f.Prestart(context.Background(), rollout.SandboxSpec{}, 2)
	time.Sleep(2 * time.Second) // the runs' execs are open
	fmt.Println("READY")
	select {} // until killed
}
