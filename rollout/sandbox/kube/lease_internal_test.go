package kube

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var epoch = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestLeaseExpired(t *testing.T) {
	l := buildLease("ns", "agenticopd-x", "h:1", time.Minute, epoch)
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{epoch, false},
		{epoch.Add(3 * time.Minute), false},
		{epoch.Add(3*time.Minute + time.Second), true},
	} {
		if got := leaseExpired(l, tc.at); got != tc.want {
			t.Errorf("leaseExpired at +%v = %v, want %v", tc.at.Sub(epoch), got, tc.want)
		}
	}
}

func TestRenewLease(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	o, err := createLease(ctx, c, "ns", "agenticopd-x", "h:1", time.Minute, epoch)
	if err != nil {
		t.Fatal(err)
	}
	o2, err := renewLease(ctx, c, "ns", o, "h:1", time.Minute, epoch.Add(20*time.Second))
	if err != nil || o2 != o {
		t.Fatalf("renew = %v, %v; want the same owner", o2, err)
	}
	l, _ := c.CoordinationV1().Leases("ns").Get(ctx, "agenticopd-x", metav1.GetOptions{})
	if got := l.Spec.RenewTime.Time; !got.Equal(epoch.Add(20 * time.Second)) {
		t.Errorf("renew time %v", got)
	}
	// A sweep of another process deleted it: it is made again.
	if err := c.CoordinationV1().Leases("ns").Delete(ctx, "agenticopd-x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o3, err := renewLease(ctx, c, "ns", o, "h:1", time.Minute, epoch.Add(40*time.Second))
	if err != nil || o3.Name != o.Name {
		t.Fatalf("renew after delete = %v, %v", o3, err)
	}
}

// TestSweep: expired Leases go, and the pods and policies of gone owners with
// them; a live factory's objects and objects not managed by agenticopd stay.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	live, err := createLease(ctx, c, "ns", "agenticopd-live", "h:1", time.Minute, epoch)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := createLease(ctx, c, "ns", "agenticopd-dead", "h:2", time.Minute, epoch.Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	mk := func(name string, o owner) {
		if _, err := c.CoreV1().Pods("ns").Create(ctx, buildPod(cfg, podParams{Name: name, Owner: o, Role: roleSandbox, Image: "i", WorkDir: "/w"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("aopd-live", live)
	mk("aopd-dead", dead)
	mk("aopd-orphan", owner{Name: "agenticopd-never", UID: "u"})
	if _, err := c.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []owner{live, dead} {
		if _, err := c.NetworkingV1().NetworkPolicies("ns").Create(ctx, buildDenyPolicy("ns", o), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := sweep(ctx, c, "ns", epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(SweepResult{Leases: 1, Pods: 2, NetworkPolicies: 1}, res); d != "" {
		t.Errorf("sweep (-want +got):\n%s", d)
	}
	pods, _ := c.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	if d := cmp.Diff([]string{"aopd-live", "someone-elses"}, names); d != "" {
		t.Errorf("pods left (-want +got):\n%s", d)
	}
	leases, _ := c.CoordinationV1().Leases("ns").List(ctx, metav1.ListOptions{})
	if len(leases.Items) != 1 || leases.Items[0].Name != "agenticopd-live" {
		t.Errorf("leases left: %v", leases.Items)
	}
	pols, _ := c.NetworkingV1().NetworkPolicies("ns").List(ctx, metav1.ListOptions{})
	if len(pols.Items) != 1 || pols.Items[0].Name != denyPolicyName(live) {
		t.Errorf("policies left: %v", pols.Items)
	}
	// A second sweep finds nothing.
	res, err = sweep(ctx, c, "ns", epoch.Add(time.Minute))
	if err != nil || res != (SweepResult{}) {
		t.Errorf("second sweep = %+v, %v", res, err)
	}
}
