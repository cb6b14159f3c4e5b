package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// execArgsEnv, set, makes the test binary run main with its value as the arguments.
const execArgsEnv = "SERVE_TEST_EXEC_ARGS"

// TestServeExitsZeroOnSignal runs the program as an operator does, in a process of its
// own, and stops it with a real signal once it serves.
func TestServeExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), execArgsEnv+"=-steps 1000 -group-size 2 -batch-size 4")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			guard := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // a failure guard only
			defer guard.Stop()

			var out strings.Builder
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), `msg="group kept"`) {
					require.NoError(t, cmd.Process.Signal(sig))
					break
				}
			}
			_, _ = io.Copy(&out, stdout)
			err = cmd.Wait()
			require.NoError(t, err, "exit code 0; stderr: %s\nstdout: %s", stderr.String(), out.String())
			assert.Contains(t, out.String(), `msg="shut down" reason="interrupted (SIGINT or SIGTERM)"`)
			assert.NotContains(t, out.String()+stderr.String(), "context canceled")
			assert.Empty(t, stderr.String())
		})
	}
}

func TestServeRefusesTopKAboveTheTeachersMaxLogprobs(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	// A vLLM server started with its default --max-logprobs 20.
	sim := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(20))
	var out bytes.Buffer
	err := run(ctx, []string{"-vllm-url", sim.URL, "-topk", "50", "-steps", "1000", "-group-size", "2", "-batch-size", "2"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-topk 50: must be at most 20, the --max-logprobs of the teacher server at "+sim.URL)
	assert.Contains(t, err.Error(), "--max-logprobs 50")
	assert.Equal(t, 2, cli.ExitCode(err))
	assert.Equal(t, 1, sim.RequestCount("/v1/completions"), "one probe, no rollout")
	assert.NotContains(t, out.String(), `msg="group`)
}

// writeTasks writes rows as a JSONL dataset and returns its path.
func writeTasks(t *testing.T, rows ...map[string]string) string {
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	var b bytes.Buffer
	for _, r := range rows {
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(append(line, '\n'))
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	return path
}

func TestServeRefusesDatasetsWithoutUsableTasks(t *testing.T) {
	builtin := tasks.Builtin()[0]
	tests := []struct {
		name    string
		path    string
		args    []string
		want    string
		wantErr error
	}{
		{name: "empty file", path: writeTasks(t), want: "has no rows", wantErr: tasks.ErrNoTasks},
		{name: "no task has tests", path: writeTasks(t, map[string]string{"task": builtin.Statement}), want: "none of its 1 tasks has tests", wantErr: tasks.ErrNoTests},
		{
			name: "smaller than the eval split", path: writeTasks(t, map[string]string{"task": builtin.Statement, "tests": builtin.TestCode}),
			want: "-eval-size 10: must be at most 0 for a dataset of 1 tasks, so that some are left to train on (0 holds out none)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"-tasks", tc.path}, tc.args...), &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.path, "the error names the file")
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.NotContains(t, out.String(), `msg="group`, "nothing ran, and never the built-in tasks")
		})
	}
}

func TestServeTrainsOnASmallDatasetWithNoEvalSplit(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	task := tasks.Builtin()[0]
	path := writeTasks(t, map[string]string{"id": "only-" + task.ID, "task": task.Statement, "test_code": task.TestCode})
	var out bytes.Buffer
	err := run(ctx, []string{"-tasks", path, "-eval-size", "0", "-groups", "1", "-steps", "1000", "-group-size", "2", "-batch-size", "2"}, &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "train_tasks=1 eval_tasks=0")
	assert.Contains(t, out.String(), `msg="group kept" task=only-`+task.ID)
}

// TestServeSaysWhereItWaits points the program at an API that is not there: the log
// says at once that it registers and where, and a signal still ends it cleanly.
func TestServeSaysWhereItWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	sig, stop := context.WithCancel(ctx)
	w := &cancelOn{match: "registering with the trajectory API", cancel: stop}
	err := run(sig, []string{"-atropos-url", "http://127.0.0.1:1", "-spool", t.TempDir(), "-group-size", "2"}, w)
	require.NoError(t, err, w.String())
	require.NoError(t, ctx.Err(), "stopped by the cancel, not the test's deadline")
	assert.Contains(t, w.String(), `msg="registering with the trajectory API (it waits for a trainer to register first)" url=http://127.0.0.1:1`)
	assert.Contains(t, w.String(), `msg="shut down"`)
}

// cancelOn is run's stdout: it cancels when a line contains match.
type cancelOn struct {
	match  string
	cancel context.CancelFunc
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.match)) {
		w.cancel()
	}
	return w.buf.Write(p)
}

func (w *cancelOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
