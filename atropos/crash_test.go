package atropos_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
)

var crashKills = flag.Int("crash.kills", 20, "TestEnvAndAPIKilled: how many kills (the env, the API, or both, in turn)")

// rapidKills is how many of TestEnvAndAPIKilled's last kills come in a row.
const rapidKills = 5

// helperAPI is the API process of TestEnvAndAPIKilledTogether: the fake on
// ATROPOS_ADDR, until it is killed or its stdin closes.
func helperAPI() int {
	srv, err := atropostest.Start(atropostest.WithAddress(os.Getenv("ATROPOS_ADDR")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	fmt.Println("listening")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperCrashEnv is the env process of TestEnvAndAPIKilledTogether: it registers
// (which sends what the spool holds), then sends groups ATROPOS_FIRST,
// ATROPOS_FIRST+1, … as fast as back-pressure allows, ATROPOS_COUNT of them (0: until
// killed), printing "accepted N" for each Send that returned nil, then "done", and
// waits for its stdin to close.
func helperCrashEnv() int {
	var logger *slog.Logger
	if os.Getenv("ATROPOS_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c, err := atropos.NewClient(os.Getenv("ATROPOS_URL"), atropos.ClientConfig{
		EnvName: "crash", GroupSize: 2, SpoolDir: os.Getenv("ATROPOS_SPOOL"), Logger: logger,
		PollInterval: 5 * time.Millisecond, StatusInterval: 5 * time.Millisecond,
		Retry: atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	first, _ := strconv.Atoi(os.Getenv("ATROPOS_FIRST"))
	count, _ := strconv.Atoi(os.Getenv("ATROPOS_COUNT"))
	go func() { // the test went away
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	ctx := context.Background()
	if err := c.Register(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if c.Registration() == nil {
			return 1
		}
	}
	// As Serve: what the client made sendable again is flushed.
	resent := c.Resent()
	flush := func() {
		if n := c.Resent(); n != resent {
			resent = n
			if err := c.Flush(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	for i := 0; count == 0 || i < count; i++ {
		if err := c.WaitReady(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		flush()
		if err := c.Send(ctx, group(float64(first+i), 2)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if !errors.Is(err, atropos.ErrSpooled) {
				continue
			}
		}
		fmt.Printf("accepted %d\n", first+i)
	}
	fmt.Println("done")
	// Go on polling, so that what the API served is seen served, until killed.
	for {
		_, _ = c.Status(ctx)
		flush()
		time.Sleep(10 * time.Millisecond)
	}
}

// spooledIDs returns the ids of the groups in the spool files of dir.
func spooledIDs(t *testing.T, dir string) []int {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var ids []int
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), ".") || e.Name() == "dead-letter.jsonl" {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // settled meanwhile
		}
		_ = atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
			ids = append(ids, int(g.Scores[0]))
			return nil
		})
		f.Close()
	}
	return ids
}

// child is a helper process of this test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	if testing.Verbose() {
		cmd.Env = append(cmd.Env, "ATROPOS_LOG=1")
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans if the test dies
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(c.kill)
	return c
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// slowTrainer pulls one batch every few milliseconds, registering again whenever the
// API has no trainer. Holding mu pauses it between pulls.
type slowTrainer struct {
	tr *atropos.Trainer

	mu      sync.Mutex
	served  map[int]int // group id -> times served
	inBatch []int       // ids served twice within one batch
}

func (p *slowTrainer) run(stop <-chan struct{}) {
	reg := atropos.TrainerRegistration{WandbGroup: "g", WandbProject: "p", BatchSize: 2, MaxTokenLen: 64, NumSteps: 1 << 20}
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		p.mu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := p.tr.Batch(ctx)
		if errors.Is(err, atropos.ErrNotRegistered) {
			_, _ = p.tr.Register(ctx, reg)
		}
		once := map[int]bool{}
		for _, g := range b {
			id := int(g.Scores[0])
			p.served[id]++
			if once[id] {
				p.inBatch = append(p.inBatch, id)
			}
			once[id] = true
		}
		cancel()
		p.mu.Unlock()
	}
}

// unserved returns the ids of accepted not served so far.
func (p *slowTrainer) unserved(accepted map[int]bool) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for id := range accepted {
		if p.served[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// TestEnvAndAPIKilled: the env process, the API process, or both at the same moment (a
// node failure, a whole-job restart) are SIGKILLed while groups the API accepted wait
// for a slow trainer, -crash.kills times in turn; what was killed is started again. Every
// group the env saw accepted must reach the trainer, or else be in the dead-letter file
// (a group two of whose copies were taken into batches that the API then lost is kept
// there rather than posted a third time); no group may reach the trainer more than
// twice, nor twice in one batch.
func TestEnvAndAPIKilled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	url := "http://" + addr
	spool := t.TempDir()

	startAPI := func() *child {
		api := startChild(t, "ATROPOS_TEST_HELPER=api", "ATROPOS_ADDR="+addr)
		require.Equal(t, "listening", <-api.lines)
		return api
	}
	accepted := map[int]bool{}
	var accMu sync.Mutex
	startEnv := func(life, count int) (*child, chan struct{}) {
		env := startChild(t, "ATROPOS_TEST_HELPER=crash-env", "ATROPOS_URL="+url, "ATROPOS_SPOOL="+spool,
			"ATROPOS_FIRST="+strconv.Itoa(life*1000), "ATROPOS_COUNT="+strconv.Itoa(count))
		done := make(chan struct{})
		go func() {
			for l := range env.lines {
				if id, ok := strings.CutPrefix(l, "accepted "); ok {
					n, _ := strconv.Atoi(id)
					accMu.Lock()
					accepted[n] = true
					accMu.Unlock()
				}
				if l == "done" {
					close(done)
				}
			}
		}()
		return env, done
	}
	acceptedNow := func() map[int]bool {
		accMu.Lock()
		defer accMu.Unlock()
		out := make(map[int]bool, len(accepted))
		for k := range accepted {
			out[k] = true
		}
		return out
	}

	p := &slowTrainer{tr: newTrainer(t, url), served: map[int]int{}}
	stop := make(chan struct{})
	pulled := make(chan struct{})
	go func() { defer close(pulled); p.run(stop) }()
	defer func() { close(stop); <-pulled }()

	kept := map[int]bool{}
	readKept := func() {
		f, err := os.Open(filepath.Join(spool, "dead-letter.jsonl"))
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, atropos.ReadDeadLetters(f, func(dl atropos.DeadLetter) error {
			kept[int(dl.Group.Scores[0])] = true
			return nil
		}))
	}
	api := startAPI()
	env, _ := startEnv(1, 0)
	kinds := []string{"both", "env", "api"}
	life := 1 // the running env process's
	for kill := 1; kill <= *crashKills; kill++ {
		// Wait until groups the API accepted from this env process wait for the
		// trainer, then kill, with the trainer paused so that no batch is cut short.
		waiting := func() int {
			n := 0
			for _, id := range p.unserved(acceptedNow()) {
				if id/1000 == life {
					n++
				}
			}
			return n
		}
		// The last kills come in a row, each as soon as this env process has groups
		// waiting, while it may still be sending again what earlier ones left (a kill
		// during the replay); the others wait until what earlier processes left has
		// reached the trainer once (or the dead-letter file), as crashes apart in time.
		rapid := kill > *crashKills-rapidKills
		settled := func() bool {
			if rapid {
				return true
			}
			readKept()
			for _, id := range p.unserved(acceptedNow()) {
				if id/1000 < life && !kept[id] {
					return false
				}
			}
			// The env has seen them served too: no spool file holds one.
			for _, id := range spooledIDs(t, spool) {
				if id/1000 < life {
					return false
				}
			}
			return true
		}
		testctx.Eventually(t, func() bool { return waiting() >= 2 && settled() }, time.Millisecond)
		kind := kinds[(kill-1)%len(kinds)]
		p.mu.Lock()
		if kind != "api" {
			env.kill()
		}
		if kind != "env" {
			api.kill()
		}
		p.mu.Unlock()
		t.Logf("kill %d (%s, rapid %v): %d groups this env process saw accepted not yet served", kill, kind, rapid, waiting())
		if kind != "env" {
			api = startAPI()
		}
		if kind != "api" { // else the same env process goes on, and finds the API restarted
			life = kill + 1
			env, _ = startEnv(life, 0)
		}
	}
	env.kill()
	env, done := startEnv(*crashKills+2, 3)
	select {
	case <-done:
	case <-testctx.Context(t).Done():
		t.Fatal("the last env process did not finish")
	}
	acc := acceptedNow()
	var lost []int
	ok := func() bool {
		readKept()
		lost = lost[:0]
		for _, id := range p.unserved(acc) {
			if !kept[id] {
				lost = append(lost, id)
			}
		}
		return len(lost) == 0
	}
	deadline := time.Now().Add(time.Minute) // a guard against a hang, not a timing
	for !ok() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	env.kill()
	p.mu.Lock()
	dups, most := 0, 0
	var over []int
	for id, n := range p.served {
		dups += max(n-1, 0)
		most = max(most, n)
		if n > 2 {
			over = append(over, id)
		}
	}
	inBatch := p.inBatch
	keptUnserved := 0
	for id := range kept {
		if p.served[id] == 0 {
			keptUnserved++
		}
	}
	p.mu.Unlock()
	t.Logf("%d kills: %d groups accepted, %d served twice, at most %d copies of one group, %d kept in the dead-letter file (%d of them never served), %d lost",
		*crashKills, len(acc), dups, most, len(kept), keptUnserved, len(lost))
	if len(lost) > 0 {
		entries, _ := os.ReadDir(spool)
		for _, e := range entries {
			data, _ := os.ReadFile(filepath.Join(spool, e.Name()))
			t.Logf("spool: %s: %.200s", e.Name(), data)
		}
	}
	require.Empty(t, lost, "accepted groups the trainer never got and the dead-letter file does not hold")
	require.Empty(t, over, "groups the trainer got more than twice")
	require.Empty(t, inBatch, "groups the trainer got twice in one batch")
}
