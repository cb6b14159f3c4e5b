package agenticopd_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// puller is a trainer that pulls batches until stopped, registering again (resuming at
// the steps it trained) whenever the API says it has no trainer, as a restarted
// trainer would. Holding mu pauses it.
type puller struct {
	api      *atropostest.Server
	tr       *atropos.Trainer
	batch    int
	numSteps int

	mu      sync.Mutex
	trained int
	served  map[string]int
	errs    int // since the last drain step
	allErrs int // in all
}

func newPuller(t testing.TB, api *atropostest.Server, batch, numSteps int) *puller {
	// No pull is cut short by the client: the API counts a batch as served once it
	// formed it, so a pull given up on a loaded machine would lose that batch in the
	// test, not in the env. A dead API refuses at once; the caller's ctx bounds the rest.
	tr, err := atropos.NewTrainer(api.URL(), atropos.WithHTTPClient(closingHTTP(t, 0)))
	require.NoError(t, err)
	return &puller{api: api, tr: tr, batch: batch, numSteps: numSteps, served: map[string]int{}}
}

func (p *puller) register(ctx context.Context) error {
	_, err := p.tr.Register(ctx, atropos.TrainerRegistration{
		BatchSize: p.batch, MaxTokenLen: 1 << 20, NumSteps: p.numSteps, StartingStep: p.trained,
	})
	return err
}

// step makes one pull (or registration). Called with p.mu held.
func (p *puller) step(ctx context.Context) {
	b, err := p.tr.Batch(ctx)
	switch {
	case errors.Is(err, atropos.ErrNotRegistered):
		_ = p.register(ctx)
	case err != nil:
		p.errs++
		p.allErrs++
	default:
		if b != nil {
			p.trained++
		}
		for _, g := range b {
			p.served[groupKey(g)]++
		}
	}
}

// run pulls every few milliseconds until stop ends. A pull is never cut short (the API
// would count a batch as served that the trainer never got); ctx bounds each pull.
func (p *puller) run(ctx, stop context.Context) {
	for stop.Err() == nil {
		p.mu.Lock()
		p.step(ctx)
		p.mu.Unlock()
		select {
		case <-stop.Done():
		case <-time.After(3 * time.Millisecond):
		}
	}
}

// drain pulls until no batch forms.
func (p *puller) drain(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 1000 {
		before := p.trained
		p.step(ctx)
		if p.trained == before && p.errs == 0 {
			return
		}
		p.errs = 0
	}
}

// collector records the groups Serve collected (OnGroup with nothing dropped).
type collector struct {
	mu   sync.Mutex
	keys map[string]int
}

func (c *collector) onGroup(g *agenticopd.Group) {
	if g.Dropped == "" {
		c.mu.Lock()
		c.keys[groupKey(g.Data)]++
		c.mu.Unlock()
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// checkDelivered asserts that every collected group was served to the trainer, waits
// in the current API's queue, or is in one of the spools: in a spool file, or in the
// dead-letter file (a group two of whose posts the API may have taken, then lost, is
// kept there rather than posted a third time); that none reached the trainer more than twice, and returns how
// many extra copies the trainer got.
func checkDelivered(t *testing.T, col *collector, p *puller, spools ...string) (duplicates int) {
	t.Helper()
	queued := map[string]int{}
	for _, g := range p.api.Queue() {
		queued[groupKey(g)]++
	}
	kept := map[string]int{}
	for _, dir := range spools {
		f, err := os.Open(filepath.Join(dir, "dead-letter.jsonl"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		require.NoError(t, atropos.ReadDeadLetters(f, func(dl atropos.DeadLetter) error {
			kept[groupKey(dl.Group)]++
			return nil
		}))
		f.Close()
	}
	if len(kept) > 0 {
		t.Logf("%d groups kept in the dead-letter file", len(kept))
	}
	// Groups still in a spool are not lost: the client sends them once the queue of the
	// earlier registration that took them shows they are no longer there.
	spooled := map[string]int{}
	for _, dir := range spools {
		names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		require.NoError(t, err)
		for _, name := range names {
			if filepath.Base(name) == "dead-letter.jsonl" {
				continue
			}
			f, err := os.Open(name)
			require.NoError(t, err)
			require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
				spooled[groupKey(g)]++
				return nil
			}))
			f.Close()
		}
	}
	if len(spooled) > 0 {
		t.Logf("%d groups still in the spool, waiting", len(spooled))
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	lost := 0
	over := 0
	for k := range col.keys {
		n := p.served[k] + queued[k]
		if p.served[k] > 2 {
			over++
		}
		if n == 0 && kept[k] == 0 && spooled[k] == 0 {
			lost++
			seen := 0
			for _, g := range p.api.Received() {
				if groupKey(g) == k {
					seen++
				}
			}
			apiServed := 0
			for _, b := range p.api.Served() {
				for _, g := range b {
					if groupKey(g) == k {
						apiServed++
					}
				}
			}
			t.Logf("lost group: received %d times by the API (all lives), served %d times by it, puller errors %d", seen, apiServed, p.allErrs)
		}
		duplicates += max(n-1, 0)
	}
	assert.Zero(t, lost, "collected groups that never reached a registered trainer's API")
	assert.Zero(t, over, "groups the trainer got more than twice")
	return duplicates
}

// disconnected returns the env ids posted to /disconnect-env.
func disconnected(t *testing.T, api *atropostest.Server) []int {
	var ids []int
	for _, r := range api.Requests() {
		if r.Path == "/disconnect-env" && r.Status == http.StatusOK {
			var b struct {
				EnvID int `json:"env_id"`
			}
			require.NoError(t, json.Unmarshal(r.Body, &b))
			ids = append(ids, b.EnvID)
		}
	}
	return ids
}

// TestServeSurvivesRestarts reproduces the three ways an API restart went wrong: groups
// in flight, another env taking this env's id, and a trainer that comes back late.
func TestServeSurvivesRestarts(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	const batch, steps = 4, 30
	tests := []struct {
		name string
		// restart restarts the API; it runs with the puller paused and reports
		// whether another env registered with id 0, and how many groups the API
		// had received when its old process died.
		restart func(t *testing.T, api *atropostest.Server, p *puller) (other bool, before int)
	}{
		{"groups in flight", func(t *testing.T, api *atropostest.Server, p *puller) (bool, int) {
			api.Kill()
			before := len(api.Received())
			time.Sleep(50 * time.Millisecond) // groups in flight fail; the env polls a dead API
			require.NoError(t, api.Restart())
			return false, before
		}},
		{"another env takes env_id 0", func(t *testing.T, api *atropostest.Server, p *puller) (bool, int) {
			api.Kill()
			before := len(api.Received())
			time.Sleep(300 * time.Millisecond) // long enough for the env to see the API gone
			// The env's /info polls are slowed, so that the other env surely
			// registers first and gets env_id 0, the id this env had.
			api.AddFault(atropostest.Fault{Path: "/info", Delay: 300 * time.Millisecond, Times: 1})
			require.NoError(t, api.Restart())
			require.NoError(t, p.register(context.Background())) // resumes at its step: no step goes back
			_, err := p.tr.Batch(context.Background())
			require.NoError(t, err)
			// The other env registers straight away (no /info first).
			resp, err := closingHTTP(t, 0).Post(api.URL()+"/register-env", "application/json", strings.NewReader(
				`{"max_token_length":2048,"desired_name":"other_env","weight":1,"group_size":2}`))
			require.NoError(t, err)
			defer resp.Body.Close()
			var reg struct {
				EnvID *int `json:"env_id"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&reg))
			require.NotNil(t, reg.EnvID)
			require.Equal(t, 0, *reg.EnvID)
			return true, before
		}},
		{"trainer late after restart", func(t *testing.T, api *atropostest.Server, p *puller) (bool, int) {
			api.Kill()
			before := len(api.Received())
			// A real run-api takes seconds to start again; a restart within the
			// instant between an env's /status-env check and its post could take
			// that post before the trainer registers (see the atropos package doc).
			time.Sleep(100 * time.Millisecond)
			require.NoError(t, api.Restart())
			// No trainer for several StatusTimeouts: the env must wait, not give up,
			// and post nothing (a post now would wedge the API).
			received := len(api.Received())
			time.Sleep(4 * time.Second)
			require.Len(t, api.Received(), received, "a group was posted into an API without a trainer")
			return false, before
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := atropostest.NewServer(t)
			sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("serve")))
			col := &collector{keys: map[string]int{}}
			env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
				c.OnGroup = col.onGroup
				c.StatusTimeout = 3 * time.Second
				c.MaxGroups = 4
			})
			spool := t.TempDir()
			client := fastClient(t, api.URL(), spool, func(c *atropos.ClientConfig) {
				if testing.Verbose() {
					c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
				}
			})
			ctx, cancel := context.WithCancel(testctx.Context(t))
			defer cancel()
			p := newPuller(t, api, batch, steps)
			require.NoError(t, p.register(ctx))
			pctx, stopPulling := context.WithCancel(ctx)
			pulled := make(chan struct{})
			go func() { defer close(pulled); p.run(ctx, pctx) }()

			serveErr := make(chan error, 1)
			go func() { serveErr <- env.Serve(ctx, client) }()
			testctx.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.trained >= 3 },
				5*time.Millisecond)
			_, err := client.Status(ctx) // the env has seen the trainer's steps
			require.NoError(t, err)
			p.mu.Lock()
			other, before := tt.restart(t, api, p)
			p.mu.Unlock()

			require.NoError(t, <-serveErr, "Serve ends by the stop rule, after the restart")
			stopPulling()
			<-pulled
			p.drain(ctx)

			spooled, err := client.Spooled()
			require.NoError(t, err)
			assert.Zero(t, spooled, "groups left in the spool")
			assert.GreaterOrEqual(t, client.Resets(), 1)
			assert.GreaterOrEqual(t, env.Metrics()["env/api_resets"], float64(1))
			info, err := p.tr.Info(ctx)
			require.NoError(t, err)
			assert.Equal(t, batch, info.BatchSize, "the API is not wedged")
			dups := checkDelivered(t, col, p, spool)
			t.Logf("%d groups collected, %d resent after the reset, %d duplicates at the trainer",
				col.count(), client.Resent(), dups)

			// Every group of this env that reached the restarted API carries the id
			// this env registered under there.
			var ours []int
			for _, e := range api.Envs() {
				if e.DesiredName == "agentic_opd" {
					ours = append(ours, e.ID)
				}
			}
			require.Len(t, ours, 1, "registered once with the restarted API (resets seen %d, registrations retired after a pause %d)", client.Resets(), client.Retired())
			col.mu.Lock()
			for _, g := range api.Received()[before:] {
				if col.keys[groupKey(g)] > 0 && !strings.Contains(groupKey(g), "other") {
					require.NotNil(t, g.EnvID)
					assert.Equal(t, ours[0], *g.EnvID, "a group stamped with another env's id")
				}
			}
			col.mu.Unlock()
			if other {
				assert.NotContains(t, disconnected(t, api), 0, "the other env was disconnected")
				assert.True(t, api.Envs()[0].Connected)
			}
		})
	}
}
