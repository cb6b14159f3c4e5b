package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

func ptr[T any](v T) *T { return &v }

func testConfig() Config {
	return Config{Namespace: "ns", HelperImage: "agenticopd.local/helper:1", Image: "agenticopd.local/py:1"}.withDefaults()
}

// TestBuildPod checks every field of the pod spec, one case per Config option.
func TestBuildPod(t *testing.T) {
	o := owner{Name: "agenticopd-abc", UID: "uid-1"}
	base := podParams{Name: "aopd-1", Owner: o, Role: roleSandbox, Image: "agenticopd.local/repo:1", WorkDir: "/testbed"}
	type check struct {
		name string
		got  func(p *corev1.Pod) any
		want any
	}
	main := func(p *corev1.Pod) corev1.Container { return p.Spec.Containers[0] }
	init := func(p *corev1.Pod) corev1.Container { return p.Spec.InitContainers[0] }
	sec := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	limits := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("1"),
		corev1.ResourceMemory:           resource.MustParse("1Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("4Gi"),
	}
	defaults := []check{
		{"name and namespace", func(p *corev1.Pod) any { return p.Name + "/" + p.Namespace }, "aopd-1/ns"},
		{"labels", func(p *corev1.Pod) any { return p.Labels }, map[string]string{
			LabelManagedBy: ManagedBy, LabelOwner: "agenticopd-abc", LabelNet: netNone, LabelRole: roleSandbox,
			LabelPool: poolKey("agenticopd.local/repo:1", "/testbed", false)}},
		{"annotations", func(p *corev1.Pod) any { return p.Annotations }, map[string]string{AnnotationImage: "agenticopd.local/repo:1"}},
		{"owner reference to the lease", func(p *corev1.Pod) any { return p.OwnerReferences }, []metav1.OwnerReference{{
			APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: "agenticopd-abc", UID: "uid-1"}}},
		{"no finalizers", func(p *corev1.Pod) any { return p.Finalizers }, []string(nil)},
		{"restart policy", func(p *corev1.Pod) any { return p.Spec.RestartPolicy }, corev1.RestartPolicyNever},
		{"no service account token", func(p *corev1.Pod) any { return p.Spec.AutomountServiceAccountToken }, ptr(false)},
		{"no service links", func(p *corev1.Pod) any { return p.Spec.EnableServiceLinks }, ptr(false)},
		{"active deadline", func(p *corev1.Pod) any { return p.Spec.ActiveDeadlineSeconds }, ptr(int64(7200))},
		{"grace 0", func(p *corev1.Pod) any { return p.Spec.TerminationGracePeriodSeconds }, ptr(int64(0))},
		{"pod seccomp", func(p *corev1.Pod) any { return p.Spec.SecurityContext }, &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}},
		{"no runtime class", func(p *corev1.Pod) any { return p.Spec.RuntimeClassName }, (*string)(nil)},
		{"host users unset", func(p *corev1.Pod) any { return p.Spec.HostUsers }, (*bool)(nil)},
		{"no host network", func(p *corev1.Pod) any { return p.Spec.HostNetwork }, false},
		{"main image", func(p *corev1.Pod) any { return main(p).Image }, "agenticopd.local/repo:1"},
		{"main name", func(p *corev1.Pod) any { return main(p).Name }, ContainerName},
		{"main command: the helper serves", func(p *corev1.Pod) any { return main(p).Command },
			[]string{podproto.HelperPath, podproto.OpServe, "-idle", "10m0s"}},
		{"main working dir", func(p *corev1.Pod) any { return main(p).WorkingDir }, "/testbed"},
		{"main pull policy", func(p *corev1.Pod) any { return main(p).ImagePullPolicy }, corev1.PullIfNotPresent},
		{"main limits = requests", func(p *corev1.Pod) any { return main(p).Resources },
			corev1.ResourceRequirements{Limits: limits, Requests: limits}},
		{"main security", func(p *corev1.Pod) any { return main(p).SecurityContext }, sec},
		{"main mounts the helper read-only", func(p *corev1.Pod) any { return main(p).VolumeMounts },
			[]corev1.VolumeMount{{Name: HelperVolume, MountPath: podproto.HelperDir, ReadOnly: true}}},
		{"init image", func(p *corev1.Pod) any { return init(p).Image }, "agenticopd.local/helper:1"},
		{"init command installs the helper", func(p *corev1.Pod) any { return init(p).Command },
			[]string{podproto.HelperImagePath, podproto.OpInstall, podproto.HelperDir}},
		{"init security", func(p *corev1.Pod) any { return init(p).SecurityContext }, sec},
		{"init mounts the helper volume", func(p *corev1.Pod) any { return init(p).VolumeMounts },
			[]corev1.VolumeMount{{Name: HelperVolume, MountPath: podproto.HelperDir}}},
		{"helper volume", func(p *corev1.Pod) any { return p.Spec.Volumes }, []corev1.Volume{{Name: HelperVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("64Mi"))}}}}},
		{"one container, one init container", func(p *corev1.Pod) any { return [2]int{len(p.Spec.Containers), len(p.Spec.InitContainers)} }, [2]int{1, 1}},
		{"a group's pods prefer one node", func(p *corev1.Pod) any {
			return p.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey
		}, corev1.LabelHostname},
	}
	cases := []struct {
		name   string
		cfg    func(*Config)
		params func(*podParams)
		checks []check
	}{
		{"defaults", nil, nil, defaults},
		{"limits from Config", func(c *Config) { c.Limits = Limits{CPU: "2", Memory: "3Gi", EphemeralStorage: "10Gi"} }, nil, []check{
			{"limits", func(p *corev1.Pod) any { return main(p).Resources.Limits }, corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("3Gi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}},
		}},
		{"a sandbox smaller than the helper's copy", func(c *Config) { c.Limits = Limits{CPU: "25m", Memory: "32Mi", EphemeralStorage: "1Gi"} }, nil, []check{
			// The pod reserves max(init, main): the init container never raises it.
			{"init limits", func(p *corev1.Pod) any { return init(p).Resources.Limits }, corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("25m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
			{"init requests", func(p *corev1.Pod) any { return init(p).Resources.Requests }, corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("25m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		}},
		{"runtime class and user namespaces", func(c *Config) { c.RuntimeClassName = "gvisor"; c.UserNamespaces = true }, nil, []check{
			{"runtime class", func(p *corev1.Pod) any { return p.Spec.RuntimeClassName }, ptr("gvisor")},
			{"hostUsers false", func(p *corev1.Pod) any { return p.Spec.HostUsers }, ptr(false)},
		}},
		{"pull policy, deadline, idle", func(c *Config) {
			c.ImagePullPolicy = corev1.PullNever
			c.PodDeadline = 90 * time.Second
			c.IdleExit = time.Minute
		}, nil, []check{
			{"main pull", func(p *corev1.Pod) any { return main(p).ImagePullPolicy }, corev1.PullNever},
			{"init pull", func(p *corev1.Pod) any { return init(p).ImagePullPolicy }, corev1.PullNever},
			{"deadline", func(p *corev1.Pod) any { return p.Spec.ActiveDeadlineSeconds }, ptr(int64(90))},
			{"idle", func(p *corev1.Pod) any { return main(p).Command[3] }, "1m0s"},
		}},
		{"pull secrets, priority, node selector", func(c *Config) {
			c.ImagePullSecrets = []string{"regcred"}
			c.PriorityClassName = "low"
			c.NodeSelector = map[string]string{"pool": "sandboxes"}
		}, nil, []check{
			{"secrets", func(p *corev1.Pod) any { return p.Spec.ImagePullSecrets }, []corev1.LocalObjectReference{{Name: "regcred"}}},
			{"priority", func(p *corev1.Pod) any { return p.Spec.PriorityClassName }, "low"},
			{"node selector", func(p *corev1.Pod) any { return p.Spec.NodeSelector }, map[string]string{"pool": "sandboxes"}},
		}},
		{"network", nil, func(p *podParams) { p.Network = true }, []check{
			{"net label", func(p *corev1.Pod) any { return p.Labels[LabelNet] }, netOpen},
			{"pool differs", func(p *corev1.Pod) any { return p.Labels[LabelPool] != poolKey(base.Image, base.WorkDir, false) }, true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := base
			if tc.params != nil {
				tc.params(&p)
			}
			pod := buildPod(cfg, p)
			for _, c := range tc.checks {
				if d := cmp.Diff(c.want, c.got(pod)); d != "" {
					t.Errorf("%s (-want +got):\n%s", c.name, d)
				}
			}
		})
	}
}

func TestBuildDenyPolicy(t *testing.T) {
	o := owner{Name: "agenticopd-abc", UID: "uid-1"}
	got := buildDenyPolicy("ns", o)
	want := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "agenticopd-abc-deny", Namespace: "ns",
			Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelOwner: "agenticopd-abc"},
			OwnerReferences: []metav1.OwnerReference{o.ref()}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelOwner: "agenticopd-abc", LabelNet: netNone}},
			// Both types and no rule: nothing in, nothing out.
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
