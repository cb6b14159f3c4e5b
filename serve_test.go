package agenticopd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

func key(g *atropos.ScoredDataGroup) string { return fmt.Sprint(g.Tokens, g.Scores) }

func TestServeDeliversEveryGroupOnceUnderBackPressure(t *testing.T) {
	const (
		groupSize  = 2
		batchSize  = 4 // two groups per batch
		numSteps   = 3
		offPolicy  = 1 // pause once one batch is queued
		maxGroups  = 2
		queueLimit = offPolicy*batchSize/groupSize + maxGroups
	)
	api := atropostest.NewServer(t)
	var (
		mu     sync.Mutex
		sent   = map[string]int{}
		served []*atropos.ScoredDataGroup
	)
	f := newFixture(t, func(c *agenticopd.Config) {
		c.MaxGroups = maxGroups
		c.PollInterval = 10 * time.Millisecond
		c.OnGroup = func(g *agenticopd.Group) {
			if g.Dropped == "" {
				mu.Lock()
				sent[key(g.Data)]++
				mu.Unlock()
			}
		}
	})
	client, err := atropos.NewClient(api.URL(), atropos.ClientConfig{
		EnvName: "agentic_opd", GroupSize: groupSize, SpoolDir: t.TempDir(),
		MaxBatchesOffPolicy: offPolicy, PollInterval: 10 * time.Millisecond,
		StatusInterval: 10 * time.Millisecond,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	trainer, err := atropos.NewTrainer(api.URL())
	require.NoError(t, err)
	_, err = trainer.Register(ctx, atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 1 << 20, NumSteps: numSteps})
	require.NoError(t, err)

	serveErr := make(chan error, 1)
	go func() { serveErr <- f.env.Serve(ctx, client) }()

	// The trainer pulls batches; while it has pulled little, the queue must stay
	// bounded (the env pauses), and it must fill again after each pull (it resumes).
	maxQueued, pulls := 0, 0
	for done := false; !done; {
		select {
		case err := <-serveErr:
			require.NoError(t, err, "Serve ends by the API's stop rule")
			done = true
		case <-time.After(20 * time.Millisecond):
		}
		queued := len(api.Received()) - len(served)
		maxQueued = max(maxQueued, queued)
		// Pull only when a full batch is waiting, so the env has to pause first.
		if queued*groupSize >= batchSize {
			b, err := trainer.Batch(ctx)
			require.NoError(t, err)
			if b != nil {
				pulls++
				mu.Lock()
				served = append(served, b...)
				mu.Unlock()
			}
		} else if pulls == 0 {
			_, err := trainer.Batch(ctx) // the first /batch lets the env register
			require.NoError(t, err)
		}
	}

	assert.LessOrEqual(t, maxQueued, queueLimit, "the env paused while the trainer did not pull")
	assert.GreaterOrEqual(t, pulls, 2, "the env resumed after the trainer pulled")

	mu.Lock()
	defer mu.Unlock()
	received := map[string]int{}
	for _, g := range api.Received() {
		received[key(g)]++
	}
	assert.Equal(t, sent, received, "every group sent arrives exactly once")
	for _, g := range served {
		assert.Contains(t, received, key(g))
	}
	assert.Equal(t, 1, api.RequestCount("/disconnect-env"))
}
