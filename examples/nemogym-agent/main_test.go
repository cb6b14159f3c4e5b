package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// closeIdle closes, when the test ends, the idle connections the collector's
// requests leave in http.DefaultClient.
func closeIdle(t *testing.T) { t.Cleanup(http.DefaultClient.CloseIdleConnections) }

func TestOfflineRunPassesTheTrainersChecks(t *testing.T) {
	closeIdle(t)
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-out", dir}, &out), out.String())
	require.Contains(t, out.String(), "SIMULATOR")
	require.Contains(t, out.String(), "every NeMo RL post-processing check passes")

	f, err := os.Open(filepath.Join(dir, "rollouts.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	lines := 0
	for sc.Scan() {
		lines++
		require.NoError(t, nemogymtest.CheckResult(sc.Bytes()))
		var line struct {
			Task map[string]json.RawMessage `json:"task"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		require.Contains(t, line.Task, "statement")
		require.NotContains(t, line.Task, "hidden_tests", "the hidden tests leaked into the rollouts file")
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 8, lines)
}

func TestFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{{"-failures", "maybe"}, {"-repeats", "0"}, {"-serve"}, {"-serve", "-config-json", "{"}} {
		err := run(context.Background(), args, &bytes.Buffer{})
		require.Equal(t, 2, cli.ExitCode(err), "%v: %v", args, err)
	}
	clitest.CheckFlags(t, run,
		[]string{"out", "task-count", "repeats", "topk", "serve", "addr", "config-json", "model-url", "tokenizer-url",
			"teacher-url", "judge-url", "rows", "failures"},
		[]clitest.BadLine{
			clitest.Bad("task-count", "-task-count", "0"),
			clitest.Bad("task-count", "-task-count", "99"),
			clitest.Bad("topk", "-topk", "0"),
			clitest.Bad("config-json", "-serve", "-config-json", filepath.Join(t.TempDir(), "missing.json")),
			clitest.Bad("config-json", "-serve", "-config-json", "{"),
		})
}

func TestConfigJSONIsTheJSONOrAFile(t *testing.T) {
	dir := t.TempDir()
	b := []byte(`{"self": {"host": "127.0.0.1", "port": 9}}`)
	file := filepath.Join(dir, "view.json")
	require.NoError(t, os.WriteFile(file, b, 0o644))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("not json"), 0o644))

	for _, raw := range []string{string(b), file, "  " + string(b)} {
		v, err := readView(raw)
		require.NoError(t, err, raw)
		require.Equal(t, 9, v.Self.Port, raw)
	}
	_, err := readView(bad)
	require.ErrorContains(t, err, "-config-json "+bad+": must be the JSON view app.py writes")
	_, err = readView(filepath.Join(dir, "none.json"))
	require.ErrorContains(t, err, "no such file")
}

// syncBuffer is a bytes.Buffer safe for the server's log and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// -serve takes its addresses from the JSON app.py writes, and answers NeMo RL's
// collector.
func TestServeFromTheLaunchersConfig(t *testing.T) {
	closeIdle(t)
	sim, err := scripted.Start(8)
	require.NoError(t, err)
	defer sim.Close()
	model := nemogymtest.NewModelServer(t, nemogymtest.ModelConfig{Backend: sim.Client(), EOS: sim.Tokenize("<|im_end|>")[0], Temperature: 1, TopP: 1})
	u, err := url.Parse(model.URL)
	require.NoError(t, err)
	modelPort, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	modelHost := u.Hostname()
	v := map[string]any{
		"self": map[string]any{"name": "agentic_opd_go_agent", "host": "127.0.0.1", "port": 0,
			"model_server": map[string]any{"type": "responses_api_models", "name": "policy_model"},
			"teacher_url":  sim.URL, "judge_url": sim.URL},
		"addrs":           map[string]any{"policy_model": map[string]any{"host": modelHost, "port": modelPort}},
		"policy_base_url": []string{model.URL + "/v1"},
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	// The view as a file, as a launcher may hand it over.
	view := filepath.Join(t.TempDir(), "view.json")
	require.NoError(t, os.WriteFile(view, b, 0o644))
	go func() {
		done <- run(ctx, []string{"-serve", "-addr", "127.0.0.1:0", "-topk", "8", "-config-json", view}, out)
	}()
	addrRE := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	testctx.Eventually(t, func() bool { return addrRE.MatchString(out.String()) }, 10*time.Millisecond, out.String())
	agentURL := "http://" + addrRE.FindStringSubmatch(out.String())[1]

	task := tasks.Builtin()[0]
	row := nemogym.TaskFields(task)
	row["responses_create_params"] = map[string]any{"input": task.Statement}
	col := nemogymtest.Collector{AgentURL: agentURL, Driver: nemogymtest.NeMoRL, Temperature: 1, TopP: 1, MaxNewTokens: 1024}
	runs, _, err := col.Run(context.Background(), []map[string]any{row}, 2)
	require.NoError(t, err, out.String())
	require.Len(t, runs, 2)
	for _, r := range runs {
		require.NoError(t, nemogymtest.CheckResult(r.Raw))
	}
	require.NoError(t, nemogymtest.CheckGroups(runs, 2))
	cancel()
	require.NoError(t, <-done)
}
