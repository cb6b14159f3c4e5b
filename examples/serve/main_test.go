package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(execArgsEnv); ok {
		// The test binary re-executed as the program itself (see startProgram).
		os.Args = append([]string{"serve"}, strings.Fields(args)...)
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

func TestServeOfflineFeedsTheTrainer(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-steps", "2", "-group-size", "2", "-batch-size", "4", "-spool", t.TempDir(), "-metrics-every", "2"}, &out), out.String())
	text := out.String()
	first, _, _ := strings.Cut(text, "\n")
	assert.Contains(t, first, "SIMULATOR")
	assert.Contains(t, text, `msg="trainer: step" step=1`)
	assert.Contains(t, text, `msg="trainer: step" step=2`)
	assert.Contains(t, text, `msg="group kept"`)
	assert.Contains(t, text, "msg=metrics ")
	// What an operator reads: the configuration, the registration, each group, the end.
	assert.Regexp(t, `msg=starting atropos_url=http://127.0.0.1:\d+ policy_url=\S+ teacher_url=\S+ judge_url=\S+ env_name=agentic_opd weight=1 group_size=2 topk=50 .* sandbox=\S+`, text)
	assert.Contains(t, text, `msg="sandbox: ready"`, "the sandbox's logger is the program's")
	assert.Contains(t, text, `msg="registering with the trajectory API`)
	assert.Regexp(t, `msg="atropos: registered" env_id=0 \S+ batch_size=4`, text, "the client's logger is the program's")
	assert.Contains(t, text, `msg="shut down" reason="the trainer has every step it asked for"`)
}

func TestServeLogsJSONAndStopsAfterGroups(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	var out bytes.Buffer
	// Many trainer steps: -groups is what stops it.
	require.NoError(t, run(ctx, []string{"-groups", "2", "-steps", "1000", "-group-size", "2", "-batch-size", "4", "-log-json", "-metrics-every", "1"}, &out), out.String())
	assert.Contains(t, out.String(), `"msg":"shut down","reason":"the 2 groups asked for were sent"`)
	kept, metrics := 0, 0
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "every line is JSON: %s", sc.Text())
		switch rec["msg"] {
		case "group kept":
			kept++
			assert.NotEmpty(t, rec["task"])
		case "metrics":
			metrics++
			assert.Contains(t, rec, "train/mean_reward")
		}
	}
	assert.GreaterOrEqual(t, kept, 2)
	assert.GreaterOrEqual(t, metrics, kept, "every group, and once at the end")
}

func TestServeTasksFromJSONL(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	// The built-in tasks three times over, as dataset rows, so that the scripted
	// student recognises them (24 rows: 14 train after the eval split of 10).
	var b strings.Builder
	for i := range 3 {
		for _, task := range tasks.Builtin() {
			line, err := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-%d", task.ID, i), "task": task.Statement, "test_code": task.TestCode})
			require.NoError(t, err)
			b.Write(append(line, '\n'))
		}
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	var out bytes.Buffer
	err := run(ctx, []string{"-tasks", path, "-groups", "1", "-steps", "1000", "-group-size", "2", "-batch-size", "2"}, &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), `msg="tasks loaded" source=`+path+` tasks=24`)
	assert.Regexp(t, `msg="group kept" task=[a-z_]+-[0-2] `, out.String(), "the dataset's rows")
}

// TestServeRepositoryTasks serves the repository's SWE-bench rows of the toy
// repository (recognised by their columns) in sandboxes of the toy image until one
// group was sent.
func TestServeRepositoryTasks(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl")
	var out bytes.Buffer
	err := run(context.Background(), []string{"-tasks", path, "-image", imagestest.SWERef(t), "-image-cache", t.TempDir(),
		"-eval-size", "0", "-groups", "1", "-steps", "1000", "-group-size", "2", "-batch-size", "2"}, &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), `msg="tasks loaded" source=`+path+` tasks=3 format=swe rows=3 repository_tasks=3`)
	assert.Regexp(t, `msg="group kept" task=agentic-opd__swe-toy-\d `, out.String())
	assert.Contains(t, out.String(), `msg="shut down" reason="the 1 groups asked for were sent"`)
}

// scrapeOnGroup is run's stdout: at the first group it scrapes the metrics endpoint
// the log announced.
type scrapeOnGroup struct {
	t       *testing.T
	mu      sync.Mutex
	buf     bytes.Buffer
	url     string
	scraped string
}

var endpointRE = regexp.MustCompile(`msg="metrics endpoint" url=(\S+)`)

func (w *scrapeOnGroup) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := endpointRE.FindSubmatch(p); m != nil {
		w.url = string(m[1])
	}
	if bytes.Contains(p, []byte(`msg="group kept"`)) && w.scraped == "" && w.url != "" {
		resp, err := http.Get(w.url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			w.scraped = string(b)
			if resp.StatusCode != http.StatusOK {
				w.t.Errorf("scrape: %s", resp.Status)
			}
		} else {
			w.t.Errorf("scrape: %v", err)
		}
	}
	return w.buf.Write(p)
}

func TestServeMetricsEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	w := &scrapeOnGroup{t: t}
	err := run(ctx, []string{"-groups", "1", "-steps", "1000", "-group-size", "2", "-batch-size", "2", "-metrics-addr", "127.0.0.1:0"}, w)
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NoError(t, err, w.buf.String())
	require.NotEmpty(t, w.scraped, "scraped while serving")
	problems, err := promlint.New(strings.NewReader(w.scraped)).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
	for _, line := range []string{
		`agenticopd_env_dropped_groups_total{reason="scores_equal"} `,
		"# TYPE agenticopd_train_reward histogram",
		"# TYPE agenticopd_opd_hints_total counter",
		"# TYPE agenticopd_requests_generate_total counter",
		"# TYPE agenticopd_rollout_rollouts_total counter",
		"# TYPE agenticopd_sandboxes_open gauge",
		"# TYPE agenticopd_spooled_groups gauge",
		`agenticopd_send_duration_seconds_count{outcome="refused"} 0`,
		`agenticopd_request_duration_seconds_count{role="teacher_score"} `,
		"# HELP agenticopd_env_send_failures_total Sends that gave up",
		"# TYPE go_goroutines gauge",
	} {
		assert.Contains(t, w.scraped, line)
	}
	assert.NotContains(t, w.scraped, "agenticopd metric", "HELP says what a metric is")
	assert.NotContains(t, w.scraped, "agenticopd_train_mean_reward", "no lifetime means")
	assert.Regexp(t, `(?m)^agenticopd_rollout_rollouts_total [1-9]`, w.scraped, "the first group's rollouts are counted")
	assert.Regexp(t, `(?m)^agenticopd_send_duration_seconds_count\{outcome="ok"\} [1-9]`, w.scraped, "the first group's send is timed")
	_, err = http.Get(endpointRE.FindStringSubmatch(w.buf.String())[1])
	assert.Error(t, err, "the endpoint closes with run")
}

func TestServeStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	sig, stop := context.WithCancel(ctx)
	w := &cancelOnGroup{t: t, cancel: stop}
	err := run(sig, []string{"-steps", "1000", "-group-size", "2", "-batch-size", "4", "-spool", t.TempDir()}, w)
	w.mu.Lock()
	w.closed = true
	out := w.buf.String()
	w.mu.Unlock()
	require.NoError(t, err, "a signal is a clean shut down: "+out)
	require.NoError(t, ctx.Err(), "stopped by the cancel, not the test's deadline")
	assert.Contains(t, out, "group kept")
	assert.Contains(t, out, `msg="shut down" reason="interrupted (SIGINT or SIGTERM)"`)
	assert.NotContains(t, out, "context canceled")
}

// cancelOnGroup is run's stdout: it cancels run's ctx at the env's first group, and
// fails the test if anything writes after run returned.
type cancelOnGroup struct {
	t      *testing.T
	cancel context.CancelFunc
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (w *cancelOnGroup) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.t.Errorf("write after run returned: %q", p)
	}
	if bytes.Contains(p, []byte(`msg="group kept"`)) {
		w.cancel()
	}
	return w.buf.Write(p)
}

func TestServeFlags(t *testing.T) {
	clitest.CheckFlags(t, run,
		[]string{"atropos-url", "spool", "groups", "tasks", "vllm-url", "model", "teacher-url", "judge-url",
			"group-size", "topk", "seed", "metrics-every", "metrics-addr", "log-json", "batch-size", "steps",
			"env-name", "weight", "eval-size", "hf-token", "hf-cache", "max-dropped", "tasks-format", "specs", "image", "image-cache"},
		[]clitest.BadLine{
			clitest.Bad("atropos-url", "-atropos-url", "localhost:8000", "-spool", "x"),
			clitest.Bad("vllm-url", "-vllm-url", "127.0.0.1:9001"),
			clitest.Bad("teacher-url", "-teacher-url", "ftp://host"),
			clitest.Bad("judge-url", "-judge-url", "http://"),
			clitest.Bad("weight", "-weight", "0"),
			clitest.Bad("weight", "-weight", "NaN"),
			clitest.Bad("env-name", "-env-name", ""),
			clitest.Bad("eval-size", "-eval-size", "-1"),
			clitest.Bad("max-dropped", "-max-dropped", "0"),
			clitest.Bad("spool", "-atropos-url", "http://127.0.0.1:1"),
			clitest.Bad("group-size", "-group-size", "3"),
			clitest.Bad("batch-size", "-batch-size", "1", "-group-size", "4"),
			clitest.Bad("groups", "-groups", "-1"),
			clitest.Bad("steps", "-steps", "0"),
			clitest.Bad("metrics-addr", "-metrics-addr", "9100"),
			clitest.Bad("tasks", "-tasks", "tasks.csv"),
			clitest.Bad("tasks-format", "-tasks-format", "csv"),
			clitest.Bad("log-json", "-log-json=sometimes"),
		})
}
