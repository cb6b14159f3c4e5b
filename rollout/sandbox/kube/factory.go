package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// cleanupTimeout bounds the deletes of Close, which has no context of its own.
const cleanupTimeout = 30 * time.Second

// Factory makes one pod per sandbox. It implements [rollout.SandboxFactory],
// [rollout.SpecFactory] and [rollout.Prestarter], and is safe for concurrent use.
// It holds a Lease, a watch and a renewal loop: Close it when done (its sandboxes
// first, or Close deletes their pods under them).
type Factory struct {
	cfg         Config
	client      kubernetes.Interface
	httpClient  *http.Client // the clientset's (nil with Config.Client)
	exec        *execer
	watch       *podWatch
	holder      string
	leaseName   string
	enforcement Enforcement
	policyErr   error
	limiter     flowcontrol.RateLimiter
	pool        *pool

	ctx    context.Context // ends at Close: the background work's
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	own    owner
	closed bool
	live   map[string]bool // pods created and not deleted
}

var (
	_ rollout.SpecFactory = (*Factory)(nil)
	_ rollout.Prestarter  = (*Factory)(nil)
)

// New checks cfg, creates the factory's Lease and deny-all NetworkPolicy, sweeps what
// gone factories left in the namespace, opens the factory's pod watch and, unless
// cfg.SkipNetworkProbe, starts a probe pod (the helper image, under the deny-all
// policy), lists its network interfaces through the helper and deletes it: the
// probe shows that the helper image pulls, the helper runs and exec reaches pods,
// and decides [Enforcement.Network]. A bad cfg gives an error wrapping
// [ErrInvalidConfig]; a probe pod that does not start one wrapping [ErrPodStart].
//
// Unlike most constructors New does I/O, on purpose (as the bubblewrap backend's
// New): a Factory exists only when it can make sandboxes.
func New(ctx context.Context, cfg Config) (*Factory, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(cfg.REST)
	rc.QPS, rc.Burst = max(rc.QPS, cfg.QPS), max(rc.Burst, cfg.Burst)
	client := cfg.Client
	var hc *http.Client
	if client == nil {
		var err error
		if hc, err = rest.HTTPClientFor(rc); err != nil {
			return nil, configError("REST: %v", err)
		}
		c, err := kubernetes.NewForConfigAndClient(rc, hc)
		if err != nil {
			return nil, configError("REST: %v", err)
		}
		client = c
	}
	ex, err := newExecer(rc, cfg.Namespace, cfg.MaxExecs)
	if err != nil {
		return nil, err
	}
	var id [5]byte
	_, _ = rand.Read(id[:])
	f := &Factory{
		cfg: cfg, client: client, httpClient: hc, exec: ex, holder: holderIdentity(),
		leaseName: "agenticopd-" + hex.EncodeToString(id[:]),
		limiter:   flowcontrol.NewTokenBucketRateLimiter(cfg.CreateQPS, cfg.CreateBurst),
		pool:      newPool(),
		live:      map[string]bool{},
	}
	f.own, err = createLease(ctx, client, cfg.Namespace, f.leaseName, f.holder, cfg.LeaseDuration, time.Now())
	if err != nil {
		if hc != nil {
			hc.CloseIdleConnections()
		}
		return nil, err
	}
	res, err := Sweep(ctx, client, cfg.Namespace)
	logSweep(ctx, cfg.Logger, res, err)
	if err := f.createPolicy(ctx); err != nil {
		f.policyErr = err
		if !apierrors.IsForbidden(err) {
			f.deleteLease()
			if hc != nil {
				hc.CloseIdleConnections()
			}
			return nil, err
		}
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	sel := labels.SelectorFromSet(labels.Set{LabelOwner: f.leaseName}).String()
	f.watch = newPodWatch(client, cfg.Namespace, sel, cfg.Logger)
	started := make(chan struct{})
	f.wg.Go(func() { f.watch.run(f.ctx, started) })
	f.wg.Go(f.keepAlive)
	select {
	case <-started:
	case <-ctx.Done():
		_ = f.Close()
		return nil, ctx.Err()
	}
	if err := f.probe(ctx); err != nil {
		_ = f.Close()
		return nil, err
	}
	cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "kube: factory ready", slog.String("namespace", cfg.Namespace),
		slog.String("lease", f.leaseName), slog.String("network", f.enforcement.Network.String()),
		slog.String("network_detail", f.enforcement.NetworkDetail))
	return f, nil
}

// createPolicy creates the deny-all NetworkPolicy for the factory's pods.
func (f *Factory) createPolicy(ctx context.Context) error {
	_, err := f.client.NetworkingV1().NetworkPolicies(f.cfg.Namespace).Create(ctx, buildDenyPolicy(f.cfg.Namespace, f.owner()), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kube: create networkpolicy: %w", err)
	}
	return nil
}

// probe runs the probe pod and sets f.enforcement.
func (f *Factory) probe(ctx context.Context) error {
	f.enforcement.NotEnforced = notEnforced(f.cfg)
	if f.cfg.SkipNetworkProbe {
		f.enforcement.Network, f.enforcement.NetworkDetail = networkEnforcement(f.cfg, nil, false, f.policyErr)
		return nil
	}
	name, err := f.startPod(ctx, podParams{Role: roleProbe, Image: f.cfg.HelperImage, WorkDir: "/"})
	if err != nil {
		return err
	}
	defer f.deletePod(name)
	ifaces, err := probeInterfaces(ctx, f.exec.pod(name))
	if err != nil {
		return fmt.Errorf("kube: probe pod %s: %w", name, err)
	}
	f.enforcement.Interfaces = ifaces
	f.enforcement.Network, f.enforcement.NetworkDetail = networkEnforcement(f.cfg, ifaces, true, f.policyErr)
	return nil
}

// keepAlive renews the Lease every third of its duration and sweeps every
// SweepInterval, until Close.
func (f *Factory) keepAlive() {
	renew := time.NewTicker(f.cfg.LeaseDuration / 3)
	defer renew.Stop()
	var sweepC <-chan time.Time
	if f.cfg.SweepInterval > 0 {
		t := time.NewTicker(f.cfg.SweepInterval)
		defer t.Stop()
		sweepC = t.C
	}
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-renew.C:
			cur := f.owner()
			o, err := renewLease(f.ctx, f.client, f.cfg.Namespace, cur, f.holder, f.cfg.LeaseDuration, time.Now())
			if err != nil {
				f.cfg.Logger.LogAttrs(f.ctx, slog.LevelWarn, "kube: lease", slog.String("error", err.Error()))
				continue
			}
			if o != cur {
				f.cfg.Logger.LogAttrs(f.ctx, slog.LevelWarn, "kube: the lease was gone and was made again; pods it owned are being collected",
					slog.String("lease", o.Name))
				f.mu.Lock()
				f.own = o
				f.mu.Unlock()
			}
		case <-sweepC:
			res, err := Sweep(f.ctx, f.client, f.cfg.Namespace)
			logSweep(f.ctx, f.cfg.Logger, res, err)
		}
	}
}

func (f *Factory) owner() owner {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.own
}

// Lease returns the name of the factory's Lease, which owns its pods.
func (f *Factory) Lease() string { return f.leaseName }

// createPod creates a pod for p (rate-limited) and tracks it.
func (f *Factory) createPod(ctx context.Context, p podParams) (string, error) {
	if err := f.limiter.Wait(ctx); err != nil {
		return "", err
	}
	p.Name, p.Owner = newPodName(), f.owner()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return "", ErrClosed
	}
	f.live[p.Name] = true
	f.mu.Unlock()
	f.watch.track(p.Name)
	_, err := f.client.CoreV1().Pods(f.cfg.Namespace).Create(ctx, buildPod(f.cfg, p), metav1.CreateOptions{})
	if err != nil {
		f.forgetPod(p.Name)
		return "", fmt.Errorf("kube: create pod: %w", err)
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		// Close may have listed its pods before this one existed.
		f.deletePod(p.Name)
		return "", ErrClosed
	}
	return p.Name, nil
}

// waitReady waits for pod name to run, at most StartTimeout.
func (f *Factory) waitReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.StartTimeout)
	defer cancel()
	st, err := f.watch.wait(ctx, name, func(s podState) bool { return s.phase != phasePending })
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("%w: pod %s not running after %s: %w", ErrPodStart, name, f.cfg.StartTimeout, &startError{phasePending, st.reason})
	case err != nil:
		return err
	case st.phase == phaseReady:
		return nil
	}
	return fmt.Errorf("%w: pod %s: %w", ErrPodStart, name, &startError{st.phase, st.reason})
}

// startPod creates a pod and waits for it; a pod that does not start is deleted.
func (f *Factory) startPod(ctx context.Context, p podParams) (string, error) {
	name, err := f.createPod(ctx, p)
	if err != nil {
		return "", err
	}
	if err := f.waitReady(ctx, name); err != nil {
		f.deletePod(name)
		return "", err
	}
	return name, nil
}

// deletePod deletes pod name (at once) and stops tracking it.
func (f *Factory) deletePod(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := deletePod(ctx, f.client, f.cfg.Namespace, name); err != nil {
		f.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "kube: delete pod", slog.String("error", err.Error()))
	}
	f.forgetPod(name)
}

func (f *Factory) forgetPod(name string) {
	f.watch.forget(name)
	f.mu.Lock()
	delete(f.live, name)
	f.mu.Unlock()
}

// resolve turns a spec into the pod's image, workspace and network, or refuses it.
func (f *Factory) resolve(spec rollout.SandboxSpec) (podParams, error) {
	p := podParams{Role: roleSandbox, Image: spec.Image, WorkDir: spec.WorkDir, Network: spec.Network}
	if p.Image == "" {
		p.Image = f.cfg.Image
	}
	if p.Image == "" {
		return p, ErrNoImage
	}
	if p.WorkDir == "" {
		p.WorkDir = f.cfg.WorkDir
	}
	if !path.IsAbs(p.WorkDir) {
		return p, fmt.Errorf("kube: WorkDir %q is not absolute", spec.WorkDir)
	}
	p.WorkDir = path.Clean(p.WorkDir)
	switch p.WorkDir {
	case "/", "/proc", "/dev", "/sys", "/etc", "/tmp", podproto.HelperDir:
		return p, fmt.Errorf("kube: WorkDir %q cannot be a workspace", spec.WorkDir)
	}
	if !p.Network && f.enforcement.Network == NetworkUnenforced {
		return p, fmt.Errorf("%w: %s", ErrNetworkUnenforced, f.enforcement.NetworkDetail)
	}
	return p, nil
}

// NewSandbox makes a sandbox for the zero spec: Config.Image, the workspace
// Config.WorkDir, no network.
func (f *Factory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	return f.NewSandboxFor(ctx, rollout.SandboxSpec{})
}

// NewSandboxFor makes a sandbox for spec: a pod of spec.Image (Config.Image when it
// names none) whose workspace is spec.WorkDir (Config.WorkDir when it names none),
// off the network unless spec.Network. It takes a prestarted pod of that spec when
// there is one. Errors: [ErrNoImage], [ErrNetworkUnenforced], [ErrPodStart] (an image
// that does not pull, a pod that is not scheduled within Config.StartTimeout), API
// errors, [ErrClosed]; all are the factory's, none is a rollout's. The caller closes
// the sandbox.
func (f *Factory) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	p, err := f.resolve(spec)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	name, err := f.takeOrStart(ctx, p)
	if err != nil {
		return nil, err
	}
	sb, err := newSandbox(f, name, p.WorkDir)
	if err == nil {
		// The first exec is the readiness check: the helper answers and the
		// workspace is a directory.
		if _, err = sb.client.Stat(ctx, "."); err != nil {
			err = fmt.Errorf("%w: pod %s: the helper did not answer: %w", ErrPodStart, name, err)
		}
	}
	if err != nil {
		f.deletePod(name)
		return nil, err
	}
	return sb, nil
}

// Close stops the factory's background work, deletes every pod it made that is not
// deleted yet, its NetworkPolicy and its Lease (the garbage collector would delete
// the pods after the Lease; a cluster may run none). It is idempotent; sandboxes
// still open fail after it.
func (f *Factory) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	// A create under way when Close began deletes its own pod (createPod).
	f.mu.Lock()
	var names []string
	for n := range f.live {
		names = append(names, n)
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, n := range names {
		if err := deletePod(ctx, f.client, f.cfg.Namespace, n); err != nil {
			errs = append(errs, err)
		}
	}
	err := f.client.NetworkingV1().NetworkPolicies(f.cfg.Namespace).Delete(ctx, denyPolicyName(f.owner()), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		errs = append(errs, fmt.Errorf("delete networkpolicy: %w", err))
	}
	if err := f.deleteLeaseCtx(ctx); err != nil {
		errs = append(errs, err)
	}
	if f.httpClient != nil {
		// client-go caches transports process-wide; their idle connections
		// would outlive the factory.
		f.httpClient.CloseIdleConnections()
	}
	if len(errs) > 0 {
		return fmt.Errorf("kube: close: %w", errors.Join(errs...))
	}
	return nil
}

func (f *Factory) deleteLease() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = f.deleteLeaseCtx(ctx)
}

func (f *Factory) deleteLeaseCtx(ctx context.Context) error {
	bg := metav1.DeletePropagationBackground
	err := f.client.CoordinationV1().Leases(f.cfg.Namespace).Delete(ctx, f.leaseName, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete lease: %w", err)
	}
	return nil
}
