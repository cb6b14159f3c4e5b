package sandboxtest_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunWaitsAndAnswers(t *testing.T) {
	f := sandboxtest.New(sandboxtest.Config{Latency: 20 * time.Millisecond, Exec: func(cmd rollout.Command, ws fs.FS) rollout.CommandResult {
		b, err := fs.ReadFile(ws, "in.txt")
		if err != nil {
			return rollout.CommandResult{ExitCode: 1}
		}
		return rollout.CommandResult{Stdout: append(b, cmd.Shell...)}
	}})
	sb, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, sb.WriteFile("in.txt", []byte("seen:")))
	res, err := sb.Run(t.Context(), rollout.Command{Shell: "cmd"})
	require.NoError(t, err)
	assert.Equal(t, "seen:cmd", string(res.Stdout))
	assert.GreaterOrEqual(t, res.Duration, 20*time.Millisecond)

	res, err = sb.Run(t.Context(), rollout.Command{Shell: "cmd", Timeout: time.Millisecond})
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 124, res.ExitCode)
}

func TestFilesStayInTheWorkspace(t *testing.T) {
	sb, err := sandboxtest.New(sandboxtest.Config{}).NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	require.NoError(t, sb.WriteFile("a/b/c.txt", []byte("x")))
	got, err := fs.ReadFile(sb.FS(), "a/b/c.txt")
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
	for _, p := range []string{"../x", "/tmp/x", "a/../../x"} {
		assert.Error(t, sb.WriteFile(p, []byte("x")), p)
		_, err := sb.ReadFile(p)
		assert.Error(t, err, p)
	}
}

func TestCloseEndsRun(t *testing.T) {
	sb, err := sandboxtest.New(sandboxtest.Config{Latency: time.Hour}).NewSandbox(t.Context())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(context.Background(), rollout.Command{Shell: "x"})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, sb.Close())
	require.NoError(t, sb.Close(), "Close is idempotent")
	assert.True(t, errors.Is(<-done, sandboxtest.ErrClosed))
	_, err = sb.Run(t.Context(), rollout.Command{Shell: "x"})
	assert.ErrorIs(t, err, sandboxtest.ErrClosed)
	assert.ErrorIs(t, sb.WriteFile("y", nil), sandboxtest.ErrClosed)
}

func TestRunHonoursContext(t *testing.T) {
	sb, err := sandboxtest.New(sandboxtest.Config{Latency: time.Hour}).NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err = sb.Run(ctx, rollout.Command{Shell: "x"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
