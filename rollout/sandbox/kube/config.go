package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Defaults used when a [Config] field is left at its zero value.
const (
	DefaultWorkDir          = "/workspace"     // the workspace when neither the spec nor Config.WorkDir names one
	DefaultTimeout          = 30 * time.Second // Config.Timeout
	DefaultMaxTimeout       = 10 * time.Minute // Config.MaxTimeout
	DefaultOutputLimit      = 64 << 10         // Config.OutputLimit, bytes per stream
	DefaultKillOutputLimit  = 16 << 20         // Config.KillOutputLimit, bytes
	DefaultPodDeadline      = 2 * time.Hour    // Config.PodDeadline (activeDeadlineSeconds)
	DefaultIdleExit         = 10 * time.Minute // Config.IdleExit
	DefaultStartTimeout     = 10 * time.Minute // Config.StartTimeout
	DefaultLeaseDuration    = 60 * time.Second // Config.LeaseDuration
	DefaultSweepInterval    = 5 * time.Minute  // Config.SweepInterval
	DefaultQPS              = 50               // Config.QPS
	DefaultBurst            = 100              // Config.Burst
	DefaultCreateQPS        = 10               // Config.CreateQPS, pods created per second
	DefaultCreateBurst      = 20               // Config.CreateBurst
	DefaultMaxExecs         = 256              // Config.MaxExecs
	DefaultMaxIdle          = 64               // Config.MaxIdle
	DefaultCPU              = "1"              // Limits.CPU
	DefaultMemory           = "1Gi"            // Limits.Memory
	DefaultEphemeralStorage = "4Gi"            // Limits.EphemeralStorage
	DefaultRestoreTimeout   = 30 * time.Second // Config.RestoreTimeout
)

// Names the factory gives its objects.
const (
	// ContainerName is the sandbox pod's main container, the one every exec goes to.
	ContainerName = "sandbox"
	// InitContainerName is the container that copies the helper into the pod.
	InitContainerName = "helper"
	// HelperVolume is the emptyDir the helper is copied into.
	HelperVolume = "agenticopd-helper"
	// LabelManagedBy is set to [ManagedBy] on every object the factory makes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "agenticopd"
	// LabelOwner names the factory's Lease on every object it owns.
	LabelOwner = "agenticopd.io/owner"
	// LabelNet is "none" on a pod without network (the deny-all NetworkPolicy
	// selects it) and "open" otherwise.
	LabelNet = "agenticopd.io/net"
	// LabelPool is the hash of the pool key (image, workdir, network) of a pod.
	LabelPool = "agenticopd.io/pool"
	// LabelRole is "sandbox" for sandbox pods and "probe" for the probe pod.
	LabelRole = "agenticopd.io/role"
	// AnnotationImage holds the pod's image reference as the spec named it.
	AnnotationImage = "agenticopd.io/image"
	// AnnotationHolder holds host:pid of the env process on the Lease.
	AnnotationHolder = "agenticopd.io/holder"
)

// Config configures a [Factory]. REST, Namespace and HelperImage are required; the
// zero value of every other field is a documented default.
type Config struct {
	// REST reaches the API server (from a kubeconfig, or rest.InClusterConfig): the
	// library reads no environment and no file itself. Exec streams are opened
	// with it. The factory works on a copy whose QPS and Burst are at least QPS
	// and Burst below.
	REST *rest.Config
	// Client, when set, is used for every call but exec instead of a clientset
	// made from REST (tests pass client-go's fake clientset).
	Client kubernetes.Interface
	// Namespace is where every object is made. The factory needs the Role the
	// package documentation lists there, and nothing cluster-wide.
	Namespace string

	// HelperImage is the image of the in-pod helper (agenticopd-pod image writes
	// it): its init container copies the helper into every pod.
	HelperImage string
	// Image is the image of NewSandbox's sandboxes (function-level tasks, which name
	// no image): it needs /bin/sh and the interpreter the tasks use. Empty: NewSandbox,
	// and NewSandboxFor with a spec naming no image, fail with [ErrNoImage].
	Image string
	// ImagePullPolicy of both containers. Default IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// ImagePullSecrets are the names of Secrets in Namespace for private registries.
	ImagePullSecrets []string
	// WorkDir is the workspace of a sandbox whose spec names none: default
	// [DefaultWorkDir]. An image sandbox's workspace is its spec's WorkDir, else
	// this one, created empty where the image has none.
	WorkDir string

	// Limits are every sandbox pod's resource limits (requests equal them).
	Limits Limits
	// RuntimeClassName, when set, is every pod's runtimeClassName (gVisor, Kata).
	RuntimeClassName string
	// UserNamespaces sets hostUsers: false, so that root in the pod is not root on
	// the node (Kubernetes 1.33 or later, with a runtime that supports it).
	UserNamespaces bool
	// PriorityClassName, when set, is every pod's priorityClassName.
	PriorityClassName string
	// NodeSelector, when set, is every pod's nodeSelector.
	NodeSelector map[string]string

	// TrustNetworkPolicy says the cluster's network plugin enforces NetworkPolicy.
	// A spec with Network false is held by a deny-all NetworkPolicy; the factory
	// cannot see from inside a pod whether the plugin enforces it (the probe only
	// reads interface state, it makes no connection), so unless the probe pod had
	// only a loopback interface such specs are refused with [ErrNetworkUnenforced]
	// unless this is set. See [Enforcement].
	TrustNetworkPolicy bool
	// SkipNetworkProbe leaves out the probe pod at [New]: [Enforcement.Network] is
	// then [NetworkPolicyTrusted] with TrustNetworkPolicy and [NetworkUnenforced]
	// otherwise.
	SkipNetworkProbe bool

	// Timeout is the wall-clock limit of a command whose Timeout is zero. Default
	// [DefaultTimeout]. MaxTimeout caps any command's. Default [DefaultMaxTimeout].
	Timeout, MaxTimeout time.Duration
	// OutputLimit is the bytes of each of stdout and stderr kept (head and tail, as
	// the bubblewrap sandbox keeps them). Default [DefaultOutputLimit].
	OutputLimit int
	// KillOutputLimit is the total output past which a command is killed. Default
	// [DefaultKillOutputLimit].
	KillOutputLimit int64
	// RestoreTimeout bounds a Restore's walk in the pod. Default
	// [DefaultRestoreTimeout].
	RestoreTimeout time.Duration

	// PodDeadline is every pod's activeDeadlineSeconds: the hard cap on its life,
	// held by the kubelet whether or not anybody is left to delete it. Default
	// [DefaultPodDeadline].
	PodDeadline time.Duration
	// IdleExit is how long the helper's PID 1 waits without an exec before it ends
	// its pod. Default [DefaultIdleExit].
	IdleExit time.Duration
	// StartTimeout bounds a pod's wait for Ready (scheduling, pulls, start).
	// Default [DefaultStartTimeout].
	StartTimeout time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds; it is renewed every third
	// of it, and a sweep deletes Leases not renewed for three durations. Default
	// [DefaultLeaseDuration].
	LeaseDuration time.Duration
	// SweepInterval is how often a live factory sweeps the namespace. Default
	// [DefaultSweepInterval]; negative: only at New.
	SweepInterval time.Duration

	// QPS and Burst are the API client's rate limit (client-go's defaults, 5 and
	// 10, throttle the creates and deletes of a group's start). Defaults
	// [DefaultQPS] and [DefaultBurst].
	QPS   float32
	Burst int
	// CreateQPS and CreateBurst bound how fast pods are created, prestarted ones
	// included. Defaults [DefaultCreateQPS] and [DefaultCreateBurst].
	CreateQPS   float32
	CreateBurst int
	// MaxExecs bounds the exec streams open at once. Default [DefaultMaxExecs].
	MaxExecs int
	// MaxIdle caps the prestarted pods waiting, all pools together. Default
	// [DefaultMaxIdle]; negative: no prestarting.
	MaxIdle int

	// Logger receives the probe outcome, sweeps and pod failures. Nil: no logging.
	Logger *slog.Logger
}

// Limits are a sandbox pod's resource limits, as Kubernetes quantities. Requests are
// set equal to them (Guaranteed QoS). Empty fields are the defaults.
type Limits struct {
	// CPU is the container's cpu limit. Default [DefaultCPU].
	CPU string
	// Memory is the container's memory limit, held by the kernel for the whole
	// container: past it the OOM killer kills a process (the command's result
	// shows the 137 of SIGKILL) or, where the node kills whole containers
	// (cgroup v2's memory.oom.group), the sandbox ends ([EndMemory]); either way
	// a result, never an error. Default [DefaultMemory].
	Memory string
	// EphemeralStorage is the container's ephemeral-storage limit (its writable
	// layer, logs and the helper's emptyDir), held by the kubelet's eviction after
	// the fact. Default [DefaultEphemeralStorage].
	EphemeralStorage string
}

// Sentinel errors.
var (
	// ErrInvalidConfig wraps a [Config] a caller must fix.
	ErrInvalidConfig = errors.New("kube: invalid config")
	// ErrNoImage: a spec naming no image, and no Config.Image.
	ErrNoImage = errors.New("kube: no image: the spec names none and Config.Image is empty")
	// ErrNetworkUnenforced: a spec with Network false on a cluster where the
	// factory cannot show that pods are kept off the network.
	ErrNetworkUnenforced = errors.New("kube: a sandbox without network was asked for, and this cluster's NetworkPolicy enforcement is unknown")
	// ErrPodStart wraps the error of a pod that did not become ready: an image that
	// cannot be pulled, a pod that cannot be scheduled, a container that cannot be
	// created. It is the factory's error, never a rollout's.
	ErrPodStart = errors.New("kube: the sandbox pod did not start")
	// ErrClosed is returned by a Sandbox after Close and by a Factory after Close.
	ErrClosed = errors.New("kube: closed")
	// ErrPodLost wraps the error of a call whose pod is gone for a reason no
	// action of the agent explains (deleted by someone else, its node gone, its
	// Lease lost): the factory's error.
	ErrPodLost = errors.New("kube: the sandbox pod is gone")
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Timeout, DefaultTimeout)
	def(&c.MaxTimeout, DefaultMaxTimeout)
	def(&c.RestoreTimeout, DefaultRestoreTimeout)
	def(&c.PodDeadline, DefaultPodDeadline)
	def(&c.IdleExit, DefaultIdleExit)
	def(&c.StartTimeout, DefaultStartTimeout)
	def(&c.LeaseDuration, DefaultLeaseDuration)
	def(&c.SweepInterval, DefaultSweepInterval)
	if c.WorkDir == "" {
		c.WorkDir = DefaultWorkDir
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if c.OutputLimit == 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.KillOutputLimit == 0 {
		c.KillOutputLimit = DefaultKillOutputLimit
	}
	if c.QPS == 0 {
		c.QPS = DefaultQPS
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.CreateQPS == 0 {
		c.CreateQPS = DefaultCreateQPS
	}
	if c.CreateBurst == 0 {
		c.CreateBurst = DefaultCreateBurst
	}
	if c.MaxExecs == 0 {
		c.MaxExecs = DefaultMaxExecs
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = DefaultMaxIdle
	}
	if c.Limits.CPU == "" {
		c.Limits.CPU = DefaultCPU
	}
	if c.Limits.Memory == "" {
		c.Limits.Memory = DefaultMemory
	}
	if c.Limits.EphemeralStorage == "" {
		c.Limits.EphemeralStorage = DefaultEphemeralStorage
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config with defaults applied.
func (c Config) validate() error {
	switch {
	case c.REST == nil:
		return configError("REST is required (from a kubeconfig or rest.InClusterConfig)")
	case c.Namespace == "":
		return configError("Namespace is required")
	case len(validation.IsDNS1123Label(c.Namespace)) > 0:
		return configError("Namespace %q is not a valid namespace name", c.Namespace)
	case c.HelperImage == "":
		return configError("HelperImage is required: the image agenticopd-pod image writes, pushed where the cluster pulls from")
	case !strings.HasPrefix(c.WorkDir, "/"):
		return configError("WorkDir %q is not absolute", c.WorkDir)
	case c.Timeout < 0 || c.MaxTimeout < 0 || c.PodDeadline < 0 || c.IdleExit < 0 || c.StartTimeout < 0 || c.LeaseDuration < 0 || c.RestoreTimeout < 0:
		return configError("negative duration")
	case c.Timeout > c.MaxTimeout:
		return configError("Timeout %v over MaxTimeout %v", c.Timeout, c.MaxTimeout)
	case c.PodDeadline < time.Second:
		return configError("PodDeadline %v under a second", c.PodDeadline)
	case c.LeaseDuration < 3*time.Second:
		return configError("LeaseDuration %v under 3s", c.LeaseDuration)
	case c.OutputLimit < 0 || c.KillOutputLimit < 0 || c.MaxExecs < 0 || c.QPS < 0 || c.Burst < 0 || c.CreateQPS < 0 || c.CreateBurst < 0:
		return configError("negative limit")
	}
	for name, q := range map[string]string{"CPU": c.Limits.CPU, "Memory": c.Limits.Memory, "EphemeralStorage": c.Limits.EphemeralStorage} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return configError("Limits.%s %q: %v", name, q, err)
		}
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return configError("ImagePullPolicy %q", c.ImagePullPolicy)
	}
	return nil
}
