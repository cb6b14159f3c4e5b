package agenticopd_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// faultKind is one kind of injected fault, firing on every every-th request.
type faultKind struct {
	name            string
	every           int
	status          int
	drop, malformed bool
	delay           time.Duration
}

// faultMix fires on about 20% of requests (1/19+1/23+1/29+1/31+1/37), spread over the
// five kinds; timeout is longer than the clients' per-attempt timeout.
func faultMix(timeout time.Duration) []faultKind {
	return []faultKind{
		{name: "5xx", every: 19, status: 503},
		{name: "dropped connection", every: 23, drop: true},
		{name: "timeout", every: 29, delay: timeout},
		{name: "malformed JSON", every: 31, malformed: true},
		{name: "slow response", every: 37, delay: 30 * time.Millisecond},
	}
}

var faultsFull = flag.Bool("faults-full", false,
	"TestFaultInjection collects 200 groups instead of 40; AGENTICOPD_FAULTS_FULL=1 does the same")

// faultGroups is the number of groups TestFaultInjection collects: 40 by default, which
// meets every fault kind dozens of times and both API restarts; 200 with -faults-full.
func faultGroups() int {
	if *faultsFull || os.Getenv("AGENTICOPD_FAULTS_FULL") != "" {
		return 200
	}
	return 40
}

// TestFaultInjection: 40 groups (200 with -faults-full) through Serve while the policy server and the
// trajectory API both fail about 20% of requests (5xx, dropped connections, timeouts,
// malformed JSON, slow responses), the API is killed and restarted twice, and the
// trainer pulls throughout. Every collected group reaches the trainer; duplicates are
// counted; rollouts whose policy calls failed are counted as such. The test stops Serve
// once the groups were collected and starts the env's next client on the same spool,
// which sends what the stop cut short.
func TestFaultInjection(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	const batch = 8
	groups := faultGroups()
	api := atropostest.NewServer(t)
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("fault")))
	for _, f := range faultMix(3 * time.Second) {
		api.AddFault(atropostest.Fault{Every: f.every, Status: f.status, Drop: f.drop, Malformed: f.malformed, Delay: f.delay})
		sim.AddFault(vllmtest.Fault{Every: f.every, Status: f.status, Drop: f.drop, Malformed: f.malformed, Delay: f.delay})
	}
	policy := sim.Client(vllm.WithRetryMax(1), vllm.WithRetryWait(time.Millisecond, 5*time.Millisecond),
		vllm.WithAttemptTimeout(1500*time.Millisecond), vllm.WithHTTPClient(closingHTTP(t, 0)))
	col := &collector{keys: map[string]int{}}
	env := fastEnv(t, policy, func(c *agenticopd.Config) {
		c.OnGroup = col.onGroup
		c.StatusTimeout = 20 * time.Second
	})
	spool := t.TempDir()
	client := fastClient(t, api.URL(), spool, func(c *atropos.ClientConfig) {
		c.Retry.AttemptTimeout = 1500 * time.Millisecond
		c.TotalSteps = -1 // the test stops Serve once it collected the groups
	})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	p := newPuller(t, api, batch, 1000)
	p.tr, _ = atropos.NewTrainer(api.URL(), atropos.WithHTTPClient(closingHTTP(t, 5*time.Second)))
	for p.register(ctx) != nil { // the registration itself may meet a fault
	}
	pctx, stopPulling := context.WithCancel(ctx)
	pulled := make(chan struct{})
	go func() { defer close(pulled); p.run(ctx, pctx) }()

	serveErr := make(chan error, 1)
	sctx, stopServing := context.WithCancel(ctx)
	go func() { serveErr <- env.Serve(sctx, client) }()
	for _, at := range []int{groups / 3, 2 * groups / 3} {
		testctx.Eventually(t, func() bool { return col.count() >= at }, 5*time.Millisecond)
		p.mu.Lock() // no pull in flight when the API dies
		api.Kill()
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, api.Restart())
		p.mu.Unlock()
	}
	testctx.Eventually(t, func() bool { return col.count() >= groups }, 5*time.Millisecond)
	stopServing()
	require.ErrorIs(t, <-serveErr, context.Canceled)
	// Groups whose Send the stop cut short are in the spool: the env's next run sends them.
	next := fastClient(t, api.URL(), spool, nil)
	if err := next.Register(ctx); err != nil {
		require.ErrorIs(t, err, atropos.ErrRejected) // groups kept in the dead-letter file
		require.NotNil(t, next.Registration())
	}
	// The groups the stopped client's registration had accepted and not seen served are
	// sent again once that registration's queue is empty (the trainer still pulls). Those
	// still queued once the queue is too short for a batch stay there: they count as
	// delivered below, and the client rightly waits on them. So the loop ends when no
	// group waits, or when the queue stayed too short for a batch over 50 rounds of
	// polls (each of which may release waiting groups: an earlier registration's id
	// that fails four times in a row is one such sign).
	for short := 0; next.Waiting() > 0 && short < 50 && ctx.Err() == nil; {
		seqs := 0
		for _, g := range api.Queue() {
			seqs += g.Len()
		}
		if short++; seqs >= batch {
			short = 0
		}
		_, _ = next.Status(ctx)
		if err := next.Flush(ctx); err != nil && !errors.Is(err, atropos.ErrRejected) {
			require.NoError(t, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := next.Flush(ctx); err != nil && !errors.Is(err, atropos.ErrRejected) {
		require.NoError(t, err)
	}
	stopPulling()
	<-pulled
	apiRequests := len(api.Requests())
	api.ClearFaults()
	p.drain(ctx)
	// Every fault kind counts each request, so it fired once per every-th of them: three
	// times the longest period means each kind fired at least three times on each server.
	for name, n := range map[string]int{"policy server": len(sim.Requests()), "trajectory API": apiRequests} {
		assert.GreaterOrEqual(t, n, 3*37, "the %s met every fault kind at least three times", name)
	}

	m := env.Metrics()
	dups := checkDelivered(t, col, p, spool)
	t.Logf("%d groups collected and delivered; %d duplicates at the trainer; %d API resets seen; %d groups resent; "+
		"%v failed groups, %v rollouts with failed policy calls, %v cancelled",
		col.count(), dups, client.Resets(), client.Resent(), m["env/failed_groups"], m["env/policy_failures"], m["env/cancelled_groups"])
	assert.GreaterOrEqual(t, col.count(), groups)
	assert.Equal(t, 2, api.Restarts())
	assert.GreaterOrEqual(t, client.Resets(), 2, "both restarts were noticed")
	assert.Positive(t, m["env/policy_failures"], "rollouts whose policy calls failed are counted")
	assert.GreaterOrEqual(t, m["env/failed_groups"], float64(1), "their groups failed and were not sent")
	assert.Zero(t, m["env/send_failures"], "a Send retries until it delivers, is cancelled, or keeps the group in the dead-letter file")
	assert.Equal(t, float64(client.Abandoned()), m["env/groups_abandoned"], "groups kept in the dead-letter file are counted")
	t.Logf("%d groups kept in the dead-letter file rather than posted a third time", client.Abandoned()+next.Abandoned())
	spooled, err := next.Spooled()
	require.NoError(t, err)
	assert.Zero(t, spooled, "nothing is left to send but groups that wait on an earlier registration's queue")
}

// The env child process: run by the crash and multi-process tests, configured through
// the environment. It serves the API until Serve returns or it is killed, appending
// "env_id key" to the log file (fsynced) for every group Serve collected.
const childVar = "AGENTICOPD_FAULT_CHILD"

func TestHelperEnvProcess(t *testing.T) {
	if os.Getenv(childVar) == "" {
		return // not a test: the body of the child process of the tests below
	}
	get := func(k string) string { return os.Getenv(childVar + "_" + k) }
	name, logPath := get("NAME"), get("LOG")
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript(name)))
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer log.Close()
	var client *atropos.Client
	var mu sync.Mutex
	weight, _ := strconv.ParseFloat(get("WEIGHT"), 64)
	env := fastEnv(t, sim.Client(vllm.WithHTTPClient(closingHTTP(t, 0))), func(c *agenticopd.Config) {
		c.MaxGroups = int(2 * weight) // inference capacity in proportion to the weight, as upstream's env_weight
		c.OnGroup = func(g *agenticopd.Group) {
			mu.Lock()
			defer mu.Unlock()
			id := -1
			if r := client.Registration(); r != nil {
				id = r.EnvID
			}
			fmt.Fprintf(log, "%d %s\n", id, strings.ReplaceAll(groupKey(g.Data), " ", ","))
			_ = log.Sync()
		}
	})
	client = fastClient(t, get("API"), get("SPOOL"), func(c *atropos.ClientConfig) {
		c.EnvName = name
		c.Weight = weight
		if s := get("MIN"); s != "" {
			m, _ := strconv.ParseFloat(s, 64)
			c.MinBatchAllocation = &m
		}
		c.Retry.MaxAttempts, _ = strconv.Atoi(get("ATTEMPTS"))
		c.MaxBatchesOffPolicy = 2
	})
	err = env.Serve(context.Background(), client)
	require.NoError(t, err)
}

// child is an env child process.
type child struct {
	cmd *exec.Cmd
	log string
}

func startChild(t *testing.T, api, name, spool, log string, vars ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnvProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childVar+"=1", childVar+"_API="+api, childVar+"_NAME="+name,
		childVar+"_SPOOL="+spool, childVar+"_LOG="+log)
	for _, v := range vars {
		cmd.Env = append(cmd.Env, childVar+"_"+v)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, log: log}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// logged reads a child's log: group key -> env ids it was logged under.
func logged(t *testing.T, path string) map[string][]int {
	out := map[string][]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		id, key, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue // a line cut by the kill
		}
		n, err := strconv.Atoi(id)
		require.NoError(t, err)
		out[strings.ReplaceAll(key, ",", " ")] = append(out[strings.ReplaceAll(key, ",", " ")], n)
	}
	return out
}

func receivedKeys(api *atropostest.Server) map[string][]*atropos.ScoredDataGroup {
	out := map[string][]*atropos.ScoredDataGroup{}
	for _, g := range api.Received() {
		out[groupKey(g)] = append(out[groupKey(g)], g)
	}
	return out
}

// TestFaultCrash: the env runs as a child process, its groups piling up in the spool
// while the API refuses them, and is killed with SIGKILL mid-run. A new process on the
// same spool delivers every group the first one collected.
func TestFaultCrash(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	api := atropostest.NewServer(t)
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	p := newPuller(t, api, 4, 1000)
	require.NoError(t, p.register(ctx))
	pctx, stopPulling := context.WithCancel(ctx)
	pulled := make(chan struct{})
	go func() { defer close(pulled); p.run(ctx, pctx) }()
	defer func() { stopPulling(); <-pulled }()

	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	api.SetError("/scored_data", 503, "")
	first := startChild(t, api.URL(), "crashy", spool, filepath.Join(dir, "first.log"), "WEIGHT=1", "ATTEMPTS=1")
	testctx.Eventually(t, func() bool { return len(logged(t, first.log)) >= 6 }, 10*time.Millisecond)
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	before := logged(t, first.log)
	entries, err := os.ReadDir(spool)
	require.NoError(t, err)
	t.Logf("killed with %d groups collected, %d spool entries, %d groups at the API", len(before), len(entries), len(api.Received()))

	api.ClearFaults()
	second := startChild(t, api.URL(), "crashy", spool, filepath.Join(dir, "second.log"), "WEIGHT=1", "ATTEMPTS=0")
	testctx.Eventually(t, func() bool {
		got := receivedKeys(api)
		for k := range before {
			if len(got[k]) == 0 {
				return false
			}
		}
		return true
	}, 10*time.Millisecond, "every group the killed process collected arrives")
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGKILL))
	_ = second.cmd.Wait()
}

// TestFaultSeveralEnvProcesses: three env processes, each with its own spool, serve one
// API with weights 1, 1 and 2, reserved as minimum batch allocations of 1/4, 1/4 and
// 1/2, and with inference capacity (groups in flight) in proportion to the weight.
// Every group arrives exactly once, under its own env's id; every batch the trainer
// pulls while the three are connected holds each of them, and the weight-2 env has the
// largest share.
func TestFaultSeveralEnvProcesses(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	const batch, steps = 8, 10
	api := atropostest.NewServer(t)
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	p := newPuller(t, api, batch, steps)
	require.NoError(t, p.register(ctx))
	_, err := p.tr.Batch(ctx)
	require.NoError(t, err)

	dir := t.TempDir()
	envs := []struct {
		name   string
		weight float64
	}{{"env_a", 1}, {"env_b", 1}, {"env_c", 2}}
	var children []*child
	for _, e := range envs {
		children = append(children, startChild(t, api.URL(), e.name, filepath.Join(dir, e.name), filepath.Join(dir, e.name+".log"),
			fmt.Sprintf("WEIGHT=%g", e.weight), fmt.Sprintf("MIN=%g", e.weight/4), "ATTEMPTS=0"))
	}
	testctx.Eventually(t, func() bool { return len(api.Envs()) == 3 }, 5*time.Millisecond)

	// Pull while all three are connected; these batches must mix them 2:2:4.
	var mixed [][]*atropos.ScoredDataGroup
	for len(mixed) < steps/2 && ctx.Err() == nil {
		b, err := p.tr.Batch(ctx)
		require.NoError(t, err)
		if b != nil {
			mixed = append(mixed, b)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	connected := 0
	for _, e := range api.Envs() {
		if e.Connected {
			connected++
		}
	}
	require.Equal(t, 3, connected, "all three still connected")
	total := map[string]int{}
	for i, b := range mixed {
		per := map[string]int{}
		for _, g := range b {
			require.NotNil(t, g.EnvID)
			per[api.Envs()[*g.EnvID].DesiredName] += g.Len()
		}
		// The API fills each env's reserved minimum from what it has queued, then
		// the rest in queue order; an env with a reserve and nothing queued stops
		// batch formation, so every batch holds each env at least once.
		for _, e := range envs {
			assert.GreaterOrEqual(t, per[e.name], 2, "batch %d: %v", i, per)
			total[e.name] += per[e.name]
		}
	}
	t.Logf("sequences per env over %d batches: %v", len(mixed), total)
	assert.Greater(t, total["env_c"], total["env_a"], "the env of weight 2 got the larger share")
	assert.Greater(t, total["env_c"], total["env_b"], "the env of weight 2 got the larger share")
	// Then let them reach the stop rule and end.
	go func() {
		for ctx.Err() == nil {
			_, _ = p.tr.Batch(ctx)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for _, c := range children {
		require.NoError(t, c.cmd.Wait(), "an env process failed")
	}
	cancel()

	got := receivedKeys(api)
	groups := 0
	for i, e := range envs {
		for key, ids := range logged(t, children[i].log) {
			groups++
			require.Len(t, ids, 1)
			require.Len(t, got[key], 1, "%s: a group arrived %d times", e.name, len(got[key]))
			g := got[key][0]
			require.NotNil(t, g.EnvID)
			assert.Equal(t, ids[0], *g.EnvID, "%s: a group under another id", e.name)
			assert.Equal(t, e.name, api.Envs()[*g.EnvID].DesiredName)
		}
	}
	assert.Len(t, api.Received(), groups, "nothing arrived that no env collected")
}
