package agenticopd_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/internal/benchfixture"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

var (
	loadFlag     = flag.Bool("load", false, "run the load test and benchmark (TestLoad, BenchmarkLoad); AGENTICOPD_LOAD=1 does the same")
	loadDuration = flag.Duration("load-duration", 3*time.Minute, "how long the load test keeps 64 rollouts in flight")
)

// loadEnabled reports whether the opt-in load runs were asked for. The environment
// variable serves `go test ./...`, where a flag unknown to other packages would fail.
func loadEnabled() bool { return *loadFlag || os.Getenv("AGENTICOPD_LOAD") != "" }

const (
	loadInFlight = 64 // rollouts in flight
	// loadWorkers is the number of groups of 4 collected at once: twice 64/4, so that
	// groups waiting for the teacher leave no rollout slot idle.
	loadWorkers = 32
)

// openSandboxes wraps a sandbox factory and counts the sandboxes open: one per rollout
// in flight, two while a rollout is verified (the tests run in a sandbox of their own).
type openSandboxes struct {
	rollout.SandboxFactory
	open atomic.Int64
}

func (o *openSandboxes) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := o.SandboxFactory.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	o.open.Add(1)
	return &inFlightSandbox{Sandbox: sb, open: &o.open}, nil
}

type inFlightSandbox struct {
	rollout.Sandbox
	once sync.Once
	open *atomic.Int64
}

// Start forwards to the wrapped sandbox, which the verifier needs (rollout.Starter).
func (s *inFlightSandbox) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	st, ok := s.Sandbox.(rollout.Starter)
	if !ok {
		return nil, errors.New("load: the wrapped sandbox cannot start processes")
	}
	return st.Start(ctx, cmd)
}

func (s *inFlightSandbox) Close() error {
	s.once.Do(func() { s.open.Add(-1) })
	return s.Sandbox.Close()
}

// loadSample is one reading of the process's resources.
type loadSample struct {
	at       time.Duration
	liveHeap uint64 // HeapAlloc right after a forced collection
	inFlight int64  // sandboxes open
}

// loadReport is what a load run measured.
type loadReport struct {
	duration                       time.Duration
	rollouts, groups               int64
	meanInFlight                   float64 // after warm-up
	maxInFlight                    int64
	peakHeap, peakRSS              uint64 // largest HeapAlloc sampled; VmHWM
	warmLive, finalLive            uint64 // largest live heap in the first and the second half after warm-up
	fdsStart, fdsEnd               int
	procsStart, procsEnd           int
	goroutinesStart, goroutinesEnd int
}

// openFDs counts the process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// descendants counts the processes below this one (children, their children, …),
// from the parent ids in /proc/PID/stat.
func descendants() int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		fields := strings.Fields(rest)
		pid, err1 := strconv.Atoi(strings.Fields(string(b))[0])
		if len(fields) < 2 || err1 != nil {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	n := 0
	todo := []int{os.Getpid()}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		n += len(children[p])
		todo = append(todo, children[p]...)
	}
	return n
}

// procStatus returns a field of /proc/self/status in bytes (VmRSS, VmHWM).
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runLoad keeps loadInFlight fixture rollouts in flight for d, as groups of four with
// OPD (hints on every other pair), against the simulator with 50 ms latency per request
// and in the real sandbox, and samples the process's memory meanwhile. The
// simulator's request log is cleared every few seconds: it lives in the same heap and
// would otherwise grow with every request.
func runLoad(ctx context.Context, d time.Duration, logf func(string, ...any)) (loadReport, error) {
	rep := loadReport{fdsStart: openFDs(), procsStart: descendants(), goroutinesStart: runtime.NumGoroutine()}
	f, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		return rep, fmt.Errorf("the bubblewrap sandbox is not available: %w", err)
	}
	sandboxes := &openSandboxes{SandboxFactory: f}
	sim, err := vllmtest.Start(benchfixture.ServerOptions(2)...)
	if err != nil {
		return rep, err
	}
	defer sim.Close()
	sim.AddFault(vllmtest.Fault{Delay: benchLatency})
	cfg := benchfixture.Config(sim.Client(), sandboxes, 4)
	cfg.MaxRollouts = loadInFlight
	env, err := agenticopd.NewEnv(cfg)
	if err != nil {
		return rep, err
	}

	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var groups, rollouts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, loadWorkers)
	start := time.Now()
	for range loadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				g, err := env.CollectGroup(runCtx, benchfixture.Task())
				if err != nil {
					if runCtx.Err() == nil {
						errs <- err
						stop()
					}
					return
				}
				groups.Add(1)
				rollouts.Add(int64(len(g.Rollouts)))
			}
		}()
	}

	warmUp := d / 4
	var samples []loadSample
	tick := time.NewTicker(2 * time.Second)
	for runCtx.Err() == nil {
		select {
		case <-tick.C:
		case <-runCtx.Done():
			continue
		}
		sim.ResetRequests()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rep.peakHeap = max(rep.peakHeap, ms.HeapAlloc)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		samples = append(samples, loadSample{at: time.Since(start), liveHeap: ms.HeapAlloc, inFlight: sandboxes.open.Load()})
		if len(samples)%15 == 0 {
			logf("load: %s: %d rollouts done, %d sandboxes open, live heap %.0f MB, RSS %.0f MB, %d fds, %d processes, %d goroutines",
				time.Since(start).Round(time.Second), rollouts.Load(), sandboxes.open.Load(), float64(ms.HeapAlloc)/1e6,
				float64(procStatus("VmRSS"))/1e6, openFDs(), descendants(), runtime.NumGoroutine())
		}
	}
	tick.Stop()
	wg.Wait()
	rep.duration = time.Since(start)
	rep.groups, rep.rollouts = groups.Load(), rollouts.Load()
	rep.peakRSS = procStatus("VmHWM")
	mid := warmUp + (d-warmUp)/2
	var inFlight, n int64
	for _, s := range samples {
		if s.at >= warmUp {
			inFlight += s.inFlight
			n++
			rep.maxInFlight = max(rep.maxInFlight, s.inFlight)
		}
		switch {
		case s.at < warmUp:
		case s.at < mid:
			rep.warmLive = max(rep.warmLive, s.liveHeap)
		default:
			rep.finalLive = max(rep.finalLive, s.liveHeap)
		}
	}
	if n > 0 {
		rep.meanInFlight = float64(inFlight) / float64(n)
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	sim.Close()
	// Connections the client kept alive end once the server is gone.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if openFDs() <= rep.fdsStart && descendants() <= rep.procsStart {
			break
		}
	}
	rep.fdsEnd, rep.procsEnd, rep.goroutinesEnd = openFDs(), descendants(), runtime.NumGoroutine()
	return rep, errors.Join(all...)
}

func (r loadReport) log(logf func(string, ...any)) {
	logf("load: %s, %d groups, %d rollouts (%.2f rollouts/s); after warm-up %.1f sandboxes open on average, %d at most (rollouts in flight limited to %d)",
		r.duration.Round(time.Second), r.groups, r.rollouts, float64(r.rollouts)/r.duration.Seconds(), r.meanInFlight, r.maxInFlight, loadInFlight)
	logf("load: peak heap %.0f MB, peak RSS %.0f MB; live heap after warm-up %.0f MB, at the end %.0f MB (%+.1f%%)",
		float64(r.peakHeap)/1e6, float64(r.peakRSS)/1e6, float64(r.warmLive)/1e6, float64(r.finalLive)/1e6,
		100*(float64(r.finalLive)/float64(r.warmLive)-1))
	logf("load: open fds %d at the start, %d at the end; processes %d, %d; goroutines %d, %d",
		r.fdsStart, r.fdsEnd, r.procsStart, r.procsEnd, r.goroutinesStart, r.goroutinesEnd)
}

// TestLoad is the opt-in load test: go test -run TestLoad -load . (or with
// AGENTICOPD_LOAD=1). It keeps 64 rollouts in flight for -load-duration (3 minutes) and
// checks that memory stays bounded (the live heap of the second half after warm-up is
// within 10% of the first half's), that no file descriptor or process is left behind,
// and that every goroutine ends.
func TestLoad(t *testing.T) {
	if !loadEnabled() {
		t.Skip("the load test is opt-in: go test -run TestLoad -load . (or AGENTICOPD_LOAD=1)")
	}
	base := goleak.IgnoreCurrent()
	rep, err := runLoad(t.Context(), *loadDuration, t.Logf)
	rep.log(t.Logf)
	require.NoError(t, err)
	require.Positive(t, rep.rollouts)
	assert.LessOrEqual(t, float64(rep.finalLive), 1.1*float64(rep.warmLive), "live heap grew by more than 10%% after warm-up")
	assert.LessOrEqual(t, rep.fdsEnd, rep.fdsStart, "file descriptors left open")
	assert.LessOrEqual(t, rep.procsEnd, rep.procsStart, "processes left behind")
	goleak.VerifyNone(t, base)
}

// BenchmarkLoad runs the same load once and reports its figures; it is opt-in like
// TestLoad: go test -run '^$' -bench Load -benchtime 1x -load .
func BenchmarkLoad(b *testing.B) {
	if !loadEnabled() {
		b.Skip("the load benchmark is opt-in: go test -run '^$' -bench Load -benchtime 1x -load . (or AGENTICOPD_LOAD=1)")
	}
	var rep loadReport
	for b.Loop() {
		var err error
		rep, err = runLoad(b.Context(), *loadDuration, b.Logf)
		require.NoError(b, err)
	}
	rep.log(b.Logf)
	b.ReportMetric(float64(rep.rollouts)/rep.duration.Seconds(), "rollouts/s")
	b.ReportMetric(rep.meanInFlight, "mean-sandboxes-open")
	b.ReportMetric(float64(rep.peakHeap)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(rep.peakRSS)/1e6, "peak-rss-MB")
	b.ReportMetric(100*(float64(rep.finalLive)/float64(rep.warmLive)-1), "live-heap-growth-pct")
	b.ReportMetric(float64(rep.fdsEnd-rep.fdsStart), "fds-leaked")
	b.ReportMetric(float64(rep.procsEnd-rep.procsStart), "procs-leaked")
}
