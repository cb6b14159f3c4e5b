package kube

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// Roles of the pods a factory makes (LabelRole).
const (
	roleSandbox = "sandbox"
	roleProbe   = "probe"
)

// Values of LabelNet.
const (
	netNone = "none"
	netOpen = "open"
)

// helperVolumeSize bounds the emptyDir the helper is copied into.
const helperVolumeSize = "64Mi"

// The init container's resources: it copies one static binary. Each is lowered to
// the sandbox's own limit where that is smaller.
const (
	initCPU    = "100m"
	initMemory = "64Mi"
)

// smaller returns the smaller of two quantities.
func smaller(a, b resource.Quantity) resource.Quantity {
	if b.Cmp(a) < 0 {
		return b
	}
	return a
}

// owner is the factory's Lease, which owns every object the factory makes.
type owner struct {
	Name string
	UID  types.UID
}

// ref is the ownerReference to the Lease. No blockOwnerDeletion (it needs the
// right to set finalizers on the Lease) and no controller flag: the garbage
// collector deletes the dependents of a deleted owner in the background either way.
func (o owner) ref() metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: coordinationv1.SchemeGroupVersion.String(),
		Kind:       "Lease",
		Name:       o.Name,
		UID:        o.UID,
	}
}

// podParams is what differs between the pods of one factory.
type podParams struct {
	Name    string
	Owner   owner
	Role    string
	Image   string // the main container's image
	WorkDir string // absolute; the container's working directory
	Network bool
}

// poolKey is the pool a spec's pods belong to, hashed into a label value.
func poolKey(image, workDir string, network bool) string {
	h := sha256.Sum256([]byte(image + "\x00" + workDir + "\x00" + strconv.FormatBool(network)))
	return hex.EncodeToString(h[:8])
}

// newPodName is a fresh pod name: "aopd-" and 12 random hex digits.
func newPodName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "aopd-" + hex.EncodeToString(b[:])
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// ownerLabels are the labels of every object owned by o.
func ownerLabels(o owner) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelOwner: o.Name}
}

// serveArgv is the main container's command: the helper as PID 1, ending its pod
// after idle without an exec.
func serveArgv(idle time.Duration) []string {
	return []string{podproto.HelperPath, podproto.OpServe, "-idle", idle.String()}
}

// buildPod is the pod of a sandbox (or of the probe): a pure function of the
// factory's Config (defaults applied) and p. The package documentation explains
// every field.
func buildPod(cfg Config, p podParams) *corev1.Pod {
	net := netNone
	if p.Network {
		net = netOpen
	}
	labels := ownerLabels(p.Owner)
	labels[LabelNet] = net
	labels[LabelRole] = p.Role
	labels[LabelPool] = poolKey(p.Image, p.WorkDir, p.Network)

	no := false
	grace := int64(0)
	deadline := seconds(cfg.PodDeadline)
	secCtx := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	limits := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(cfg.Limits.CPU),
		corev1.ResourceMemory:           resource.MustParse(cfg.Limits.Memory),
		corev1.ResourceEphemeralStorage: resource.MustParse(cfg.Limits.EphemeralStorage),
	}
	// A pod reserves the larger of its init container's request and its main
	// container's: the copy's never exceeds the sandbox's own.
	initLimits := corev1.ResourceList{
		corev1.ResourceCPU:    smaller(resource.MustParse(initCPU), limits[corev1.ResourceCPU]),
		corev1.ResourceMemory: smaller(resource.MustParse(initMemory), limits[corev1.ResourceMemory]),
	}
	volSize := resource.MustParse(helperVolumeSize)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       cfg.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{AnnotationImage: p.Image},
			OwnerReferences: []metav1.OwnerReference{p.Owner.ref()},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:            InitContainerName,
				Image:           cfg.HelperImage,
				ImagePullPolicy: cfg.ImagePullPolicy,
				Command:         []string{podproto.HelperImagePath, podproto.OpInstall, podproto.HelperDir},
				Resources:       corev1.ResourceRequirements{Limits: initLimits, Requests: initLimits},
				SecurityContext: secCtx,
				VolumeMounts:    []corev1.VolumeMount{{Name: HelperVolume, MountPath: podproto.HelperDir}},
			}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           p.Image,
				ImagePullPolicy: cfg.ImagePullPolicy,
				Command:         serveArgv(cfg.IdleExit),
				WorkingDir:      p.WorkDir,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
				SecurityContext: secCtx,
				VolumeMounts:    []corev1.VolumeMount{{Name: HelperVolume, MountPath: podproto.HelperDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{
				Name:         HelperVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &volSize}},
			}},
			// A group's pods (one image) prefer one node: one pull.
			Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 50,
					PodAffinityTerm: corev1.PodAffinityTerm{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelPool: labels[LabelPool]}},
						TopologyKey:   corev1.LabelHostname,
					},
				}},
			}},
			PriorityClassName: cfg.PriorityClassName,
			NodeSelector:      cfg.NodeSelector,
		},
	}
	if cfg.RuntimeClassName != "" {
		rc := cfg.RuntimeClassName
		pod.Spec.RuntimeClassName = &rc
	}
	if cfg.UserNamespaces {
		pod.Spec.HostUsers = &no
	}
	for _, s := range cfg.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return pod
}

// denyPolicyName is the name of the factory's deny-all NetworkPolicy.
func denyPolicyName(o owner) string { return o.Name + "-deny" }

// buildDenyPolicy is the NetworkPolicy that denies all ingress and egress of the
// factory's pods labelled LabelNet=none.
func buildDenyPolicy(namespace string, o owner) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            denyPolicyName(o),
			Namespace:       namespace,
			Labels:          ownerLabels(o),
			OwnerReferences: []metav1.OwnerReference{o.ref()},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelOwner: o.Name, LabelNet: netNone}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}
