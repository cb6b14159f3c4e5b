package nemogym_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// oneTurn is a finished one-turn rollout.
func oneTurn() nemogym.Outcome {
	return nemogym.Outcome{
		Trajectory: &rollout.Trajectory{
			Tokens: []int32{1, 2, 3, 7, 9}, Logprobs: []float32{0, 0, 0, -0.5, -0.25},
			Turns:    []rollout.Turn{{Message: 1, Start: 3, End: 5}},
			Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}, {Role: chat.RoleAssistant, Content: "a"}},
		},
		Reward: 0.85, Components: map[string]float64{"correctness": 0.7, "efficiency": 0.15, "tool_use": 0},
	}
}

func serve(t *testing.T, cfg nemogym.Config) string {
	t.Helper()
	s, err := nemogym.NewServer(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Wait() })
	return hs.URL
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

const goodRow = `{"responses_create_params":{"input":"q","temperature":1.0},"task":{"id":"t","statement":"Say a."},"expected":"a","_ng_task_index":0,"_ng_rollout_index":0}`

func TestServerAnswers(t *testing.T) {
	var got tasks.Task
	runner := nemogym.RunnerFunc(func(ctx context.Context, task tasks.Task) (nemogym.Outcome, error) {
		got = task
		require.NotNil(t, nemogym.SessionFrom(ctx), "the runner gets the rollout's session")
		return oneTurn(), nil
	})
	url := serve(t, nemogym.Config{Runner: runner})

	status, body := do(t, http.MethodPost, url+"/run", goodRow)
	require.Equal(t, 200, status, body)
	require.NoError(t, nemogymtest.CheckResult([]byte(body)))
	require.Equal(t, "Say a.", got.Statement)
	var res map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.JSONEq(t, `"a"`, string(res["expected"]), "task fields are echoed")
	require.JSONEq(t, `{"input":"q","temperature":1.0}`, string(res["responses_create_params"]))
	require.NotContains(t, res, "_ng_failure_class")

	for _, tc := range []struct{ method, path, body, want string }{
		{http.MethodGet, "/", "", `{"status":"ok"}`},
		{http.MethodPost, "/aggregate_metrics", `{"verify_responses":[]}`, `{}`},
	} {
		status, body := do(t, tc.method, url+tc.path, tc.body)
		require.Equal(t, 200, status)
		require.JSONEq(t, tc.want, body)
	}
	status, _ = do(t, http.MethodPost, url+"/v1/responses", `{}`)
	require.Equal(t, 404, status)
}

// Bad rows and failed rollouts under the two reporting modes.
func TestServerFailures(t *testing.T) {
	failing := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
		return nemogym.Outcome{}, errors.New("sandbox: no room")
	})
	stalled := nemogym.RunnerFunc(func(ctx context.Context, _ tasks.Task) (nemogym.Outcome, error) {
		<-ctx.Done() // a model server that never answers
		return nemogym.Outcome{}, ctx.Err()
	})
	overflow := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
		return nemogym.Outcome{}, fmt.Errorf("policy: %w", nemogym.ErrContextOverflow)
	})
	weighted := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
		o := oneTurn()
		o.Components = map[string]float64{"correctness": 1, "efficiency": 1, "tool_use": 1} // unweighted parts
		return o, nil
	})
	nanRow := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
		o := nemogym.SyntheticOutcome(2, 20, 8, 4, 3, 2)
		rows := *o.Rows
		rows.Logprobs = slices.Clone(rows.Logprobs)
		rows.Logprobs[len(rows.Logprobs)-1] = float32(math.NaN()) // a teacher row JSON cannot carry
		o.Rows = &rows
		return o, nil
	})
	for _, tc := range []struct {
		name     string
		runner   nemogym.Runner
		failures nemogym.Failures
		row      string
		status   int
		class    string
		terminal bool
		timeout  time.Duration
	}{
		{"extra params key, NeMo RL", nil, nemogym.FailStatus, `{"responses_create_params":{"input":"q","seed":1},"task_id":"t"}`, 422, "", false, 0},
		{"extra params key, standalone", nil, nemogym.FailRow, `{"responses_create_params":{"input":"q","seed":1},"task_id":"t"}`, 200, nemogym.ClassBadRow, true, 0},
		{"no params", nil, nemogym.FailStatus, `{"task_id":"t"}`, 422, "", false, 0},
		{"no task", nil, nemogym.FailStatus, `{"responses_create_params":{"input":"q"}}`, 422, "", false, 0},
		{"unknown task", nil, nemogym.FailStatus, `{"responses_create_params":{"input":"q"},"task_id":"nope"}`, 422, "", false, 0},
		{"streaming", nil, nemogym.FailStatus, `{"responses_create_params":{"input":"q","stream":true},"task_id":"t"}`, 422, "", false, 0},
		{"not JSON", nil, nemogym.FailStatus, `{`, 422, "", false, 0},
		{"rollout failed, NeMo RL", failing, nemogym.FailStatus, goodRow, 500, "", false, 0},
		{"rollout failed, standalone", failing, nemogym.FailRow, goodRow, 200, nemogym.ClassRolloutFailed, false, 0},
		{"past RolloutTimeout, NeMo RL", stalled, nemogym.FailStatus, goodRow, 500, "", false, time.Millisecond},
		{"past RolloutTimeout, standalone", stalled, nemogym.FailRow, goodRow, 200, nemogym.ClassTimeout, true, time.Millisecond},
		{"context overflow, NeMo RL", overflow, nemogym.FailStatus, goodRow, 422, "", false, 0},
		{"context overflow, standalone", overflow, nemogym.FailRow, goodRow, 200, nemogym.ClassContextOverflow, true, 0},
		{"reward is not the sum of its parts", weighted, nemogym.FailStatus, goodRow, 500, "", false, 0},
		{"NaN teacher logprob, NeMo RL", nanRow, nemogym.FailStatus, goodRow, 500, "", false, 0},
		{"NaN teacher logprob, standalone", nanRow, nemogym.FailRow, goodRow, 200, nemogym.ClassRolloutFailed, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runner := tc.runner
			if runner == nil {
				runner = nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) { return oneTurn(), nil })
			}
			url := serve(t, nemogym.Config{Runner: runner, Failures: tc.failures, RolloutTimeout: tc.timeout,
				Tasks: []tasks.Task{{ID: "t", Statement: "s"}}})
			status, body := do(t, http.MethodPost, url+"/run", tc.row)
			require.Equal(t, tc.status, status, body)
			if tc.class == "" {
				return
			}
			var res map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(body), &res))
			require.JSONEq(t, `"`+tc.class+`"`, string(res["_ng_failure_class"]))
			require.JSONEq(t, `0`, string(res["reward"]))
			require.Contains(t, res, "error")
			if tc.terminal {
				require.JSONEq(t, `true`, string(res["_ng_failure_terminal"]), "NeMo Gym must never retry it on resume")
			} else {
				require.NotContains(t, res, "_ng_failure_terminal")
			}
		})
	}
}

// A finished rollout's answer is kept for a duplicate /run within KeepBytes; past it
// (or for rows without a rollout index) the row runs again.
func TestServerKeepsAnswersForDuplicates(t *testing.T) {
	noIndex := `{"responses_create_params":{"input":"q"},"task":{"statement":"s"},"_ng_task_index":0}`
	for _, tc := range []struct {
		name  string
		keep  int64
		row   string
		wantN int64
	}{
		{"kept", 0, goodRow, 1},
		{"too large to keep", 10, goodRow, 2},
		{"keeping off", -1, goodRow, 2},
		{"no rollout index", 0, noIndex, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			runner := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
				n.Add(1)
				return oneTurn(), nil
			})
			url := serve(t, nemogym.Config{Runner: runner, KeepBytes: tc.keep})
			for range 2 {
				status, body := do(t, http.MethodPost, url+"/run", tc.row)
				require.Equal(t, 200, status, body)
			}
			require.Equal(t, tc.wantN, n.Load())
		})
	}
}

// hiddenRow is a row whose task carries what the agent is never shown, each marked so
// that a leak shows in the body: hidden tests, graded cases, a reference solution and
// a dataset's own hidden_ key; and visible keys that must be echoed.
const hiddenRow = `{"responses_create_params":{"input":"q","temperature":1.0},
 "task":{"id":"t","statement":"Say a.","test_code":"assert solve() == 'a'","source":"mine",
  "hidden_tests":"assert solve() != 'LEAK-HIDDEN-TESTS'",
  "cases":[{"input":"","output":"LEAK-CASE-OUTPUT"}],
  "reference_solution":"LEAK-REFERENCE",
  "hidden_fixture":"LEAK-FIXTURE"},
 "_ng_task_index":0,"_ng_rollout_index":0}`

// The answer echoes the row's task without its hidden keys, as a result and as a
// failure row, while the runner still gets the whole task.
func TestServerLeavesHiddenTaskKeysOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		failures nemogym.Failures
	}{
		{"answer", nil, nemogym.FailStatus},
		{"failure row", errors.New("sandbox: no room"), nemogym.FailRow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got tasks.Task
			runner := nemogym.RunnerFunc(func(_ context.Context, task tasks.Task) (nemogym.Outcome, error) {
				got = task
				if tc.err != nil {
					return nemogym.Outcome{}, tc.err
				}
				return oneTurn(), nil
			})
			url := serve(t, nemogym.Config{Runner: runner, Failures: tc.failures})
			status, body := do(t, http.MethodPost, url+"/run", hiddenRow)
			require.Equal(t, 200, status, body)
			require.Contains(t, got.HiddenTests, "LEAK-HIDDEN-TESTS", "the rollout is graded with the hidden tests")
			require.Len(t, got.Cases, 1)
			require.NotContains(t, body, "LEAK-")
			var res struct {
				Task map[string]json.RawMessage `json:"task"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &res))
			keys := make([]string, 0, len(res.Task))
			for k := range res.Task {
				keys = append(keys, k)
			}
			require.ElementsMatch(t, []string{"id", "statement", "test_code", "source"}, keys)
			require.JSONEq(t, `"assert solve() == 'a'"`, string(res.Task["test_code"]))
		})
	}
}

// numbered is a one-turn rollout of n generated tokens, each the number num, so that
// an answer holding bytes of another rollout's answer shows.
func numbered(num, n int) nemogym.Outcome {
	out := oneTurn()
	tr := *out.Trajectory
	tr.Tokens, tr.Logprobs = slices.Clone(tr.Tokens[:3]), slices.Clone(tr.Logprobs[:3])
	for range n {
		tr.Tokens = append(tr.Tokens, int32(num))
		tr.Logprobs = append(tr.Logprobs, -0.5)
	}
	tr.Turns = []rollout.Turn{{Message: 1, Start: 3, End: len(tr.Tokens)}}
	out.Trajectory = &tr
	return out
}

// Answers are written into buffers the Server reuses once no one holds them: many
// rollouts at once, duplicates joining running rollouts and getting kept answers,
// answers evicted while duplicates write them, and clients leaving early; every
// answer written is whole and its rollout's own. (Run with -race: a buffer reused
// while still written shows as a race.)
func TestServerReusesAnswerBuffersSafely(t *testing.T) {
	runner := nemogym.RunnerFunc(func(ctx context.Context, task tasks.Task) (nemogym.Outcome, error) {
		num, err := strconv.Atoi(task.ID)
		if err != nil {
			return nemogym.Outcome{}, err
		}
		time.Sleep(time.Duration(num%3) * time.Millisecond)
		return numbered(num, 100+300*(num%4)), nil
	})
	s, err := nemogym.NewServer(nemogym.Config{Runner: runner, KeepBytes: 20 << 10})
	require.NoError(t, err)
	defer s.Wait()
	check := func(num int, body []byte) error {
		var res struct {
			Task     struct{ ID string }
			Response struct {
				Output []struct {
					GenerationTokenIDs []int32 `json:"generation_token_ids"`
				}
			}
		}
		if err := json.Unmarshal(body, &res); err != nil {
			return fmt.Errorf("task %d: %w", num, err)
		}
		want := numbered(num, 100+300*(num%4)).Trajectory.Tokens[3:]
		if out := res.Response.Output; res.Task.ID != strconv.Itoa(num) || len(out) != 1 || !slices.Equal(out[0].GenerationTokenIDs, want) {
			return fmt.Errorf("task %d: the answer is another rollout's: %.200s", num, body)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := range 600 {
		num := i % 12
		row := fmt.Sprintf(`{"responses_create_params":{"input":"q"},"task":{"id":"%d","statement":"s"},"_ng_task_index":%d,"_ng_rollout_index":%d}`, num, num, i/60)
		if num >= 9 { // rows without a rollout index: never kept
			row = fmt.Sprintf(`{"responses_create_params":{"input":"q"},"task":{"id":"%d","statement":"s"}}`, num)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%7 == 0 {
				time.AfterFunc(time.Duration(i%3)*time.Millisecond, cancel) // a client that leaves
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/run", strings.NewReader(row)))
			if rec.Body.Len() == 0 && ctx.Err() != nil {
				return
			}
			if rec.Code != http.StatusOK {
				errs <- fmt.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
			if err := check(num, rec.Body.Bytes()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A rollout whose clients all left but that finishes anyway, after a rerun of its row
// finished and was kept, does not replace the kept answer: a later duplicate gets the
// answer the rerun's client got.
func TestServerKeepsTheFirstAnswerOfARow(t *testing.T) {
	gate := make(chan struct{})
	var calls atomic.Int64
	runner := nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
		if calls.Add(1) == 1 {
			<-gate // a runner that does not end with its context
		}
		return oneTurn(), nil
	})
	s, err := nemogym.NewServer(nemogym.Config{Runner: runner})
	require.NoError(t, err)
	defer s.Wait()
	post := func(ctx context.Context) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/run", strings.NewReader(goodRow)))
		return rec
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan struct{})
	go func() { post(ctx); close(left) }()
	testctx.Eventually(t, func() bool { return calls.Load() == 1 }, time.Millisecond, "the first rollout runs")
	cancel()
	<-left
	rerun := post(context.Background())
	require.Equal(t, http.StatusOK, rerun.Code, rerun.Body.String())
	close(gate)
	s.Wait() // the first rollout finished too
	again := post(context.Background())
	require.Equal(t, int64(2), calls.Load())
	require.Equal(t, rerun.Body.String(), again.Body.String(), "the kept answer was replaced")
}
