package agenticopd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// rigWithSandboxes is a rig whose sandboxes are counted.
func rigWithSandboxes(t *testing.T, srvMod func(*nemogym.Config)) (*nemoGymRig, *countingSandboxes) {
	t.Helper()
	inner, err := bwrap.New(context.Background(), bwrap.Config{})
	require.NoError(t, err)
	sbs := &countingSandboxes{inner: inner}
	rig := newNemoGymRig(t, func(c *agenticopd.Config) { c.SandboxFactory = sbs }, srvMod)
	return rig, sbs
}

func postRun(ctx context.Context, url string, row map[string]any) (int, []byte, error) {
	body, err := json.Marshal(row)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/run", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestNemoGymModelServerErrors: a model server that fails makes the rollout fail;
// NeMo RL's driver gets a 500 (an infrastructure failure it retries), the standalone
// driver a 200 failure row, and no sandbox stays open.
func TestNemoGymModelServerErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures nemogym.Failures
		driver   nemogymtest.Driver
	}{
		{"status for NeMo RL", nemogym.FailStatus, nemogymtest.NeMoRL},
		{"failure row for standalone", nemogym.FailRow, nemogymtest.Standalone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig, sbs := rigWithSandboxes(t, func(c *nemogym.Config) { c.Failures = tc.failures })
			rig.model.SetError(http.StatusServiceUnavailable)
			col := nemogymtest.Collector{AgentURL: rig.url, Driver: tc.driver, Temperature: 1, TopP: 1}
			runs, failures, err := col.Run(context.Background(), nemoGymRows(tasks.Builtin()[0]), 1)
			if tc.failures == nemogym.FailStatus {
				var re *nemogymtest.RunError
				require.ErrorAs(t, err, &re)
				require.Equal(t, http.StatusInternalServerError, re.Status)
				require.Equal(t, nemogymtest.Infra, re.Class)
				require.Contains(t, re.Body, "503")
			} else {
				require.NoError(t, err)
				require.Empty(t, runs)
				require.Len(t, failures, 1)
				require.JSONEq(t, `"rollout_failed"`, string(failures[0].Result["_ng_failure_class"]))
				require.JSONEq(t, `0`, string(failures[0].Result["reward"]))
			}
			waitRollouts(t, rig.agent)
			require.Zero(t, sbs.open, "a sandbox stayed open")
		})
	}
}

// TestNemoGymClientDisconnectReleasesTheSandbox: a model server that stalls, and a
// client that gives up mid-rollout: the rollout is canceled, its sandbox closed, and
// no goroutine is left (TestMain's goleak).
func TestNemoGymClientDisconnectReleasesTheSandbox(t *testing.T) {
	rig, sbs := rigWithSandboxes(t, nil)
	release := rig.model.Stall()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := postRun(ctx, rig.url, map[string]any{
			"responses_create_params": map[string]any{"input": "x", "temperature": 1.0, "top_p": 1.0},
			"task_id":                 tasks.Builtin()[0].ID, "_ng_task_index": 0, "_ng_rollout_index": 0,
		})
		done <- err
	}()
	testctx.Eventually(t, func() bool { return rig.model.Calls() > 0 }, 5*time.Millisecond,
		"the rollout reaches the model server")
	sbs.mu.Lock()
	require.Equal(t, 1, sbs.open, "the rollout holds its sandbox while the model stalls")
	sbs.mu.Unlock()
	cancel()
	require.True(t, errors.Is(<-done, context.Canceled))
	waitRollouts(t, rig.agent) // returns only once the rollout ended
	sbs.mu.Lock()
	defer sbs.mu.Unlock()
	require.Zero(t, sbs.open, "the sandbox was released")
}

// TestNemoGymDuplicateRun: the same /run sent twice at once (a transport retry) runs
// one rollout and both get its answer; sent again after it finished, it gets the
// same answer without a new rollout.
func TestNemoGymDuplicateRun(t *testing.T) {
	rig, sbs := rigWithSandboxes(t, nil)
	row := map[string]any{
		"responses_create_params": map[string]any{"input": "x", "temperature": 1.0, "top_p": 1.0},
		"task_id":                 tasks.Builtin()[0].ID, "_ng_task_index": 3, "_ng_rollout_index": 1,
	}
	// Count the /run requests that reached the agent server.
	var entered atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		rig.agent.ServeHTTP(w, r)
	}))
	defer front.Close()
	release := rig.model.Stall()
	var wg sync.WaitGroup
	bodies := make([][]byte, 2)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, b, err := postRun(context.Background(), front.URL, row)
			if err == nil && status != http.StatusOK {
				err = errors.New(string(b))
			}
			require.NoError(t, err)
			bodies[i] = b
		}()
	}
	// Both requests are in while the rollout stalls. (Should the second join only
	// after the rollout ended, it gets the kept answer: one rollout either way.)
	testctx.Eventually(t, func() bool { return rig.model.Calls() > 0 && entered.Load() == 2 }, 5*time.Millisecond)
	release()
	wg.Wait()
	require.True(t, bytes.Equal(bodies[0], bodies[1]), "the two answers differ (%d and %d bytes): two rollouts ran", len(bodies[0]), len(bodies[1]))
	calls := rig.model.Calls()
	_, again, err := postRun(context.Background(), front.URL, row)
	require.NoError(t, err)
	require.True(t, bytes.Equal(bodies[0], again), "the kept answer differs")
	require.Equal(t, calls, rig.model.Calls(), "no new rollout for a finished duplicate")
	require.Equal(t, 1.0, rig.env.Metrics()["rollout/rollouts"], "one rollout for three /run requests")
	sbs.mu.Lock()
	defer sbs.mu.Unlock()
	require.Zero(t, sbs.open)
}

// waitRollouts waits for the agent server's rollouts to end; the timeout is only a
// guard against a hang.
func waitRollouts(t *testing.T, s *nemogym.Server) {
	t.Helper()
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
	case <-testctx.Context(t).Done():
		t.Fatal("a rollout did not end")
	}
}

// A model server that stalls, under a RolloutTimeout: the rollout fails as
// timeout_exceeded, terminal (a 500 for NeMo RL), and its sandbox is released.
func TestNemoGymRolloutTimeout(t *testing.T) {
	for _, failures := range []nemogym.Failures{nemogym.FailStatus, nemogym.FailRow} {
		t.Run(fmt.Sprint(failures), func(t *testing.T) {
			rig, sbs := rigWithSandboxes(t, func(c *nemogym.Config) { c.Failures = failures; c.RolloutTimeout = 300 * time.Millisecond })
			release := rig.model.Stall()
			defer release()
			status, body, err := postRun(context.Background(), rig.url, map[string]any{
				"responses_create_params": map[string]any{"input": "x", "temperature": 1.0, "top_p": 1.0},
				"task_id":                 tasks.Builtin()[0].ID,
			})
			require.NoError(t, err)
			if failures == nemogym.FailStatus {
				require.Equal(t, http.StatusInternalServerError, status)
				require.Contains(t, string(body), "RolloutTimeout")
			} else {
				require.Equal(t, http.StatusOK, status)
				var res map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(body, &res))
				require.JSONEq(t, `"timeout_exceeded"`, string(res["_ng_failure_class"]))
				require.JSONEq(t, `true`, string(res["_ng_failure_terminal"]), "NeMo Gym treats the class as terminal")
			}
			waitRollouts(t, rig.agent)
			sbs.mu.Lock()
			defer sbs.mu.Unlock()
			require.Zero(t, sbs.open)
		})
	}
}

// An engine whose context is shorter than its /tokenize reports refuses the first
// prompt (NeMo Gym's model server answers an empty completion without token fields).
// The rollout is a data failure, not a 500 that NeMo RL would retry 5 times: 422 with
// the reason for NeMo RL, a terminal context_overflow row for the standalone
// collector; the sandbox is released.
func TestNemoGymContextOverflowIsADataFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures nemogym.Failures
		driver   nemogymtest.Driver
	}{
		{"status for NeMo RL", nemogym.FailStatus, nemogymtest.NeMoRL},
		{"failure row for standalone", nemogym.FailRow, nemogymtest.Standalone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := bwrap.New(context.Background(), bwrap.Config{})
			require.NoError(t, err)
			sbs := &countingSandboxes{inner: inner}
			rig := newNemoGymRigWith(t, rigMods{model: func(c *nemogymtest.ModelConfig) { c.MaxModelLen = 16 }},
				func(c *agenticopd.Config) { c.SandboxFactory = sbs }, func(c *nemogym.Config) { c.Failures = tc.failures })
			col := nemogymtest.Collector{AgentURL: rig.url, Driver: tc.driver, Temperature: 1, TopP: 1}
			runs, failures, err := col.Run(context.Background(), nemoGymRows(tasks.Builtin()[0]), 1)
			if tc.failures == nemogym.FailStatus {
				var re *nemogymtest.RunError
				require.ErrorAs(t, err, &re)
				require.Equal(t, http.StatusUnprocessableEntity, re.Status, re.Body)
				require.Equal(t, nemogymtest.Data, re.Class)
				var detail struct{ Detail string }
				require.NoError(t, json.Unmarshal([]byte(re.Body), &detail), re.Body)
				require.Contains(t, detail.Detail, "context overflow")
				require.Contains(t, detail.Detail, "max_model_len")
			} else {
				require.NoError(t, err)
				require.Empty(t, runs)
				require.Len(t, failures, 1)
				res := failures[0].Result
				require.JSONEq(t, `"context_overflow"`, string(res["_ng_failure_class"]))
				require.JSONEq(t, `true`, string(res["_ng_failure_terminal"]))
				require.JSONEq(t, `0`, string(res["reward"]))
				require.Contains(t, string(res["error"]), "context overflow")
			}
			require.Positive(t, rig.model.Calls(), "the rollout reached the model server")
			waitRollouts(t, rig.agent)
			sbs.mu.Lock()
			defer sbs.mu.Unlock()
			require.Zero(t, sbs.open, "a sandbox stayed open")
		})
	}
}
