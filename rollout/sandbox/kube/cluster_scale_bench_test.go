package kube_test

// Benchmarks of many sandboxes and of a sandbox's start on the real cluster
// (internal/kubetest): skipped where kubetest.Cluster skips. Figures and the
// command are in docs/performance.md ("Kubernetes sandboxes").

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
)

const (
	scaleSandboxes = 64 // sandboxes in flight at once
	scaleCommands  = 15 // commands of one rollout
	startSamples   = 9  // NewSandboxFor calls per start sub-benchmark
)

// rusageCPU is this process's user and system CPU so far.
func rusageCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClusterInFlight runs 64 rollouts at once from this process: each makes
// a sandbox (a main container of 64Mi and 25m cpu, so that 64 would fit the node's
// 2 cpus: the init container asks for no more than that), waits for the others (a group starts together; after inFlightStall without
// one more sandbox it goes on with those open), runs 15 short commands (sleep 0.2
// and true, alternately: the node's cpu is not what is measured) and closes it. It
// reports the sandboxes open at once, this process's cpu per rollout and per
// command, and rollouts per second over the whole group (pod starts and deletes
// included). The cpu=100m case holds 20 at once on 2 cpus: the rest wait for the
// node.
func BenchmarkClusterInFlight(b *testing.B) {
	for _, cpu := range []string{"25m", "100m"} {
		b.Run("cpu="+cpu, func(b *testing.B) { benchInFlight(b, cpu) })
	}
}

func benchInFlight(b *testing.B, cpuLimit string) {
	env := realCluster(b)
	cfg := realConfig(env)
	cfg.Limits = kube.Limits{CPU: cpuLimit, Memory: "64Mi", EphemeralStorage: "256Mi"}
	// Pods are created as fast as the API server takes them: the default 10/s
	// (bursts of 20) would stretch the group's start by 4 s.
	cfg.CreateQPS, cfg.CreateBurst = scaleSandboxes, scaleSandboxes
	// Config.MaxExecs (256) and the client's 500 requests/s (kubetest's) are not
	// reached by 64 sandboxes.
	cfg.MaxIdle = -1
	f, err := kube.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()

	var (
		open, maxOpen atomic.Int64
		rollouts      int
		starts        []time.Duration
		cpu, wall     time.Duration
	)
	for b.Loop() {
		ctx := context.Background()
		cpu0, t0 := rusageCPU(b), time.Now()
		var (
			done sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		opened := make(chan struct{}, scaleSandboxes) // one per NewSandbox returned
		release := make(chan struct{})
		stalled := releaseWhenOpen(opened, release)
		for range scaleSandboxes {
			done.Go(func() {
				fail := func(err error) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				sb, err := f.NewSandbox(ctx)
				mu.Lock()
				starts = append(starts, time.Since(t0))
				mu.Unlock()
				if err != nil {
					opened <- struct{}{}
					fail(err)
					return
				}
				defer sb.Close()
				n := open.Add(1)
				defer open.Add(-1)
				for m := maxOpen.Load(); n > m && !maxOpen.CompareAndSwap(m, n); m = maxOpen.Load() {
				}
				opened <- struct{}{}
				<-release
				for i := range scaleCommands {
					cmd := rollout.Command{Argv: []string{"true"}}
					if i%2 == 0 {
						cmd = rollout.Command{Argv: []string{"sleep", "0.2"}}
					}
					res, err := sb.Run(ctx, cmd)
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("%v: exit %d: %s", cmd.Argv, res.ExitCode, res.Stderr)
					}
					if err != nil {
						fail(err)
						return
					}
				}
			})
		}
		done.Wait()
		cpu += rusageCPU(b) - cpu0
		wall += time.Since(t0) - <-stalled
		rollouts += scaleSandboxes
		if len(errs) > 0 {
			b.Fatalf("%d of %d rollouts failed; first: %v", len(errs), scaleSandboxes, errs[0])
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	b.ReportMetric(float64(maxOpen.Load()), "in-flight")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(rollouts), "env-cpu-ms/rollout")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(rollouts*scaleCommands), "env-cpu-ms/exec")
	b.ReportMetric(float64(rollouts)/wall.Seconds(), "rollouts/s")
	b.ReportMetric(starts[len(starts)-1].Seconds(), "all-started-s")
}

// inFlightStall is how long the group waits for one more sandbox before its
// rollouts start anyway: a node whose cpu is all requested leaves the rest pending
// until sandboxes close.
const inFlightStall = 15 * time.Second

// releaseWhenOpen closes release when scaleSandboxes values came on opened, or
// when none came for inFlightStall; it then sends on the returned channel the time
// spent waiting for the stall (zero when all opened), which the rollouts/s figure
// leaves out.
func releaseWhenOpen(opened <-chan struct{}, release chan<- struct{}) <-chan time.Duration {
	stalled := make(chan time.Duration, 1)
	go func() {
		defer close(release)
		for range scaleSandboxes {
			select {
			case <-opened:
			case <-time.After(inFlightStall):
				stalled <- inFlightStall
				return
			}
		}
		stalled <- 0
	}()
	return stalled
}

// BenchmarkClusterStart measures NewSandboxFor, one call at a time, for a spec whose
// pods wait prestarted and ready (warm) and for one with its image on the node and
// no pool (image-on-node: create, schedule, the init container, the helper's
// first answer).
func BenchmarkClusterStart(b *testing.B) {
	env := realCluster(b)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("warm", func(b *testing.B) {
		cfg := realConfig(env)
		cfg.CreateQPS, cfg.CreateBurst = startSamples, startSamples
		f, err := kube.New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var lat []time.Duration
		for b.Loop() {
			b.StopTimer()
			f.Prestart(context.Background(), rollout.SandboxSpec{}, startSamples)
			waitReadyPods(b, cs, f.Lease(), startSamples)
			b.StartTimer()
			lat = append(lat, timeStarts(b, f, startSamples)...)
		}
		reportP50(b, lat)
	})
	b.Run("image-on-node", func(b *testing.B) {
		cfg := realConfig(env)
		cfg.MaxIdle = -1
		f, err := kube.New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var lat []time.Duration
		for b.Loop() {
			lat = append(lat, timeStarts(b, f, startSamples)...)
		}
		reportP50(b, lat)
	})
}

// timeStarts times n NewSandboxFor calls one after another, closing each sandbox
// before the next call.
func timeStarts(b *testing.B, f *kube.Factory, n int) []time.Duration {
	var lat []time.Duration
	for range n {
		s := time.Now()
		sb, err := f.NewSandboxFor(context.Background(), rollout.SandboxSpec{})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
		b.StopTimer()
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	return lat
}

func reportP50(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(lat[len(lat)/2].Seconds(), "p50-s")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "max-s")
}

// waitReadyPods waits until n sandbox pods of the factory's lease run with every
// container ready.
func waitReadyPods(b *testing.B, cs kubernetes.Interface, lease string, n int) {
	sel := kube.LabelOwner + "=" + lease + "," + kube.LabelRole + "=sandbox"
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, err := cs.CoreV1().Pods(realNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				ready++
			}
		}
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d prestarted pods ready after 5m", ready, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
