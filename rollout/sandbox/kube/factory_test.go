package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/internal/kubefake"
)

func TestConfigErrors(t *testing.T) {
	c := kubefake.New(t, helperBin)
	cases := map[string]func(*kube.Config){
		"no REST":          func(c *kube.Config) { c.REST = nil },
		"no namespace":     func(c *kube.Config) { c.Namespace = "" },
		"bad namespace":    func(c *kube.Config) { c.Namespace = "Not_A_Name" },
		"no helper image":  func(c *kube.Config) { c.HelperImage = "" },
		"relative workdir": func(c *kube.Config) { c.WorkDir = "work" },
		"bad quantity":     func(c *kube.Config) { c.Limits.Memory = "lots" },
		"bad pull policy":  func(c *kube.Config) { c.ImagePullPolicy = "Sometimes" },
		"timeout over max": func(c *kube.Config) { c.Timeout, c.MaxTimeout = time.Hour, time.Minute },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := baseConfig(c)
			mod(&cfg)
			f, err := kube.New(t.Context(), cfg)
			if !errors.Is(err, kube.ErrInvalidConfig) {
				if f != nil {
					_ = f.Close()
				}
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNetworkEnforcement(t *testing.T) {
	cases := []struct {
		name   string
		ifaces []string
		trust  bool
		want   kube.NetworkMode
	}{
		{"only loopback", []string{"lo"}, false, kube.NetworkLoopbackOnly},
		{"interfaces, not trusted", []string{"eth0", "lo"}, false, kube.NetworkUnenforced},
		{"interfaces, trusted", []string{"eth0", "lo"}, true, kube.NetworkPolicyTrusted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := kubefake.New(t, helperBin)
			c.SetInterfaces(tc.ifaces...)
			cfg := baseConfig(c)
			cfg.TrustNetworkPolicy = tc.trust
			f, err := kube.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			e := f.Enforcement()
			if e.Network != tc.want {
				t.Fatalf("Network = %v (%s), want %v", e.Network, e.NetworkDetail, tc.want)
			}
			if strings.Join(e.Interfaces, ",") != strings.Join(tc.ifaces, ",") {
				t.Errorf("Interfaces = %v, want %v", e.Interfaces, tc.ifaces)
			}
			sb, err := f.NewSandbox(t.Context())
			if tc.want == kube.NetworkUnenforced {
				if !errors.Is(err, kube.ErrNetworkUnenforced) {
					t.Fatalf("NewSandbox without network = %v, want ErrNetworkUnenforced", err)
				}
				// A sandbox with network claims nothing and is made.
				sb, err = f.NewSandboxFor(t.Context(), rollout.SandboxSpec{Network: true})
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = sb.Close()
			// The probe pod is gone.
			pods, _ := c.Pods(t.Context())
			for _, p := range pods {
				if p.Labels[kube.LabelRole] == "probe" {
					t.Errorf("probe pod %s left", p.Name)
				}
			}
		})
	}
}

// waitPods polls the fake until cond holds for its pods (the test's own timeout
// bounds it).
func waitPods(t *testing.T, c *kubefake.Cluster, cond func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	for {
		pods, err := c.Pods(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if cond(pods) {
			return pods
		}
		select {
		case <-t.Context().Done():
			t.Fatal("timed out")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestStartFailures(t *testing.T) {
	f, c := newFactory(t, func(cfg *kube.Config) { cfg.StartTimeout = 200 * time.Millisecond })
	c.SetStart(func(p *corev1.Pod) *corev1.PodStatus {
		switch p.Spec.Containers[0].Image {
		case "agenticopd.local/missing:1":
			return &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}}}
		case "agenticopd.local/huge:1":
			return &corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}}
		}
		return kubefake.Running()
	})
	for _, tc := range []struct{ image, want string }{
		{"agenticopd.local/missing:1", "ImagePullBackOff"},
		{"agenticopd.local/huge:1", "Unschedulable"},
	} {
		_, err := f.NewSandboxFor(t.Context(), rollout.SandboxSpec{Image: tc.image, WorkDir: "/testbed"})
		if !errors.Is(err, kube.ErrPodStart) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewSandboxFor = %v, want ErrPodStart naming %s", tc.image, err, tc.want)
		}
	}
	waitPods(t, c, func(p []corev1.Pod) bool { return len(p) == 0 })
}

// TestWaitsForRunning: a pod that is Pending (pulling) for a while, then Running,
// becomes a sandbox.
func TestWaitsForRunning(t *testing.T) {
	f, c := newFactory(t, nil)
	c.SetStart(func(p *corev1.Pod) *corev1.PodStatus {
		return &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}}
	})
	done := make(chan error, 1)
	go func() {
		sb, err := f.NewSandbox(context.Background())
		if err == nil {
			_ = sb.Close()
		}
		done <- err
	}()
	pods := waitPods(t, c, func(p []corev1.Pod) bool { return len(p) == 1 && p[0].Status.Phase == corev1.PodPending })
	select {
	case err := <-done:
		t.Fatalf("NewSandbox returned before the pod ran: %v", err)
	default:
	}
	if err := c.SetStatus(t.Context(), pods[0].Name, *kubefake.Running()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCloseDeletesEverything(t *testing.T) {
	c := kubefake.New(t, helperBin)
	f, err := kube.New(t.Context(), baseConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := f.NewSandbox(t.Context()); err != nil { // left open on purpose
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	pods, _ := c.Pods(t.Context())
	leases, _ := c.Client.CoordinationV1().Leases(kubefake.Namespace).List(t.Context(), metav1.ListOptions{})
	pols, _ := c.Client.NetworkingV1().NetworkPolicies(kubefake.Namespace).List(t.Context(), metav1.ListOptions{})
	if len(pods)+len(leases.Items)+len(pols.Items) != 0 {
		t.Errorf("left after Close: %d pods, %d leases, %d policies", len(pods), len(leases.Items), len(pols.Items))
	}
	if _, err := f.NewSandbox(t.Context()); !errors.Is(err, kube.ErrClosed) {
		t.Errorf("NewSandbox after Close = %v, want ErrClosed", err)
	}
}

// TestNewSweeps: what a killed factory left (its Lease expired, its pods) is gone
// after the next New.
func TestNewSweeps(t *testing.T) {
	c := kubefake.New(t, helperBin)
	ctx := t.Context()
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	secs := int32(60)
	l, err := c.Client.CoordinationV1().Leases(kubefake.Namespace).Create(ctx, leaseObj("agenticopd-dead", old, secs), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.CoreV1().Pods(kubefake.Namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:            "aopd-left",
		Labels:          map[string]string{kube.LabelManagedBy: kube.ManagedBy, kube.LabelOwner: l.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: l.Name, UID: l.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := kube.New(ctx, baseConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pods, _ := c.Pods(ctx)
	if len(pods) != 0 {
		t.Errorf("pods left after New: %v", pods)
	}
	leases, _ := c.Client.CoordinationV1().Leases(kubefake.Namespace).List(ctx, metav1.ListOptions{})
	if len(leases.Items) != 1 || leases.Items[0].Name != f.Lease() {
		t.Errorf("leases after New: %v", leases.Items)
	}
}

func TestPrestart(t *testing.T) {
	f, c := newFactory(t, func(cfg *kube.Config) { cfg.MaxIdle = 3 })
	spec := rollout.SandboxSpec{Image: "agenticopd.local/repo:1", WorkDir: "/testbed"}
	var _ rollout.Prestarter = f
	f.Prestart(t.Context(), spec, 5)
	if n := kube.PoolSize(f); n != 3 {
		t.Fatalf("pool size %d, want MaxIdle 3", n)
	}
	pods := waitPods(t, c, func(p []corev1.Pod) bool { return len(p) == 3 })
	sb, err := f.NewSandboxFor(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	taken := sb.(*kube.Sandbox).Pod()
	found := false
	for _, p := range pods {
		found = found || p.Name == taken
	}
	if !found {
		t.Errorf("NewSandboxFor made pod %s instead of taking a prestarted one", taken)
	}
	if n := kube.PoolSize(f); n != 2 {
		t.Errorf("pool size %d after a take, want 2", n)
	}
	// Another spec's pool is empty: a new pod.
	other, err := f.NewSandboxFor(t.Context(), rollout.SandboxSpec{Image: "agenticopd.local/repo:2", WorkDir: "/testbed"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if p := waitPods(t, c, func(p []corev1.Pod) bool { return len(p) == 4 }); len(p) != 4 {
		t.Errorf("%d pods", len(p))
	}
}

func leaseObj(name string, renew metav1.MicroTime, secs int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kube.LabelManagedBy: kube.ManagedBy}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: &secs},
	}
}

// TestPrestartPrunesEnded: prestarted pods that ended while they waited (their idle
// exit) give their room in the pool back, and are not handed out.
func TestPrestartPrunesEnded(t *testing.T) {
	f, c := newFactory(t, func(cfg *kube.Config) { cfg.MaxIdle = 2 })
	spec := rollout.SandboxSpec{Image: "agenticopd.local/repo:1", WorkDir: "/testbed"}
	f.Prestart(t.Context(), spec, 2)
	pods := waitPods(t, c, func(p []corev1.Pod) bool {
		return len(p) == 2 && p[0].Status.Phase == corev1.PodRunning && p[1].Status.Phase == corev1.PodRunning
	})
	idle := corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}
	if err := c.SetStatus(t.Context(), pods[0].Name, idle); err != nil {
		t.Fatal(err)
	}
	// The factory's watch sees the end; a take of the ended pod starts a new one.
	sb, err := f.NewSandboxFor(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.(*kube.Sandbox).Pod() == pods[0].Name {
		t.Fatal("an ended pod was handed out")
	}
	f.Prestart(t.Context(), spec, 5)
	if n := kube.PoolSize(f); n > 2 {
		t.Errorf("pool size %d over MaxIdle 2", n)
	}
}
