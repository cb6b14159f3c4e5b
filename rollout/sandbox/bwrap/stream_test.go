package bwrap_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// startModes are the two sandboxes Start is implemented for.
var startModes = []struct {
	name string
	cfg  bwrap.Config
}{
	{"bubblewrap", bwrap.Config{}},
	{"unconfined", bwrap.Config{Unconfined: true}},
}

func TestStartExchangesLines(t *testing.T) {
	for _, mode := range startModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, newFactory(t, mode.cfg))
			p, err := sb.Start(t.Context(), rollout.Command{
				Argv: []string{"python3", "-u", "-c", "import sys\nfor line in sys.stdin:\n    print(line.strip().upper())\n    print('err', file=sys.stderr)\n"},
			})
			require.NoError(t, err)
			r := bufio.NewReader(p.Stdout())
			for _, w := range []string{"one", "two"} {
				_, err := io.WriteString(p.Stdin(), w+"\n")
				require.NoError(t, err)
				line, err := r.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("%s\n", map[string]string{"one": "ONE", "two": "TWO"}[w]), line)
			}
			require.NoError(t, p.Stdin().Close())
			_, err = r.ReadString('\n')
			require.ErrorIs(t, err, io.EOF, "stdout ends with the command")
			res, err := p.Wait()
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode)
			require.Empty(t, res.Stdout, "stdout was streamed")
			require.Equal(t, "err\nerr\n", string(res.Stderr))
			require.Equal(t, mode.cfg.Unconfined, res.Unconfined)
		})
	}
}

func TestStartedCommandsGetRunsLimits(t *testing.T) {
	for _, mode := range startModes {
		t.Run(mode.name+"/timeout kills everything", func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, newFactory(t, mode.cfg))
			m := marker()
			p, err := sb.Start(t.Context(), rollout.Command{
				Shell:   fmt.Sprintf(`setsid sleep %[1]s1 & sleep %[1]s2 & echo started; while :; do :; done`, m),
				Timeout: time.Second,
			})
			require.NoError(t, err)
			line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "started\n", line)
			res, err := p.Wait()
			require.NoError(t, err)
			require.True(t, res.TimedOut)
			require.Equal(t, 124, res.ExitCode)
			require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
		})
		t.Run(mode.name+"/Kill", func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, newFactory(t, mode.cfg))
			m := marker()
			p, err := sb.Start(t.Context(), rollout.Command{Shell: fmt.Sprintf(`sleep %s & echo started; cat`, m)})
			require.NoError(t, err)
			_, err = bufio.NewReader(p.Stdout()).ReadString('\n')
			require.NoError(t, err)
			p.Kill()
			p.Kill()
			res, err := p.Wait()
			require.NoError(t, err)
			require.Equal(t, 137, res.ExitCode)
			require.False(t, res.TimedOut)
			require.Empty(t, hostProcs(t, "sleep", m), "processes left on the host")
		})
		t.Run(mode.name+"/streamed output is the caller's, standard error counts towards the hard cap", func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, newFactory(t, withKillLimit(mode.cfg, 1<<20)))
			// 8 MiB through the pipe, read by the caller: not the sandbox's to cap.
			p, err := sb.Start(t.Context(), rollout.Command{Shell: "head -c 8388608 /dev/zero", Timeout: 30 * time.Second})
			require.NoError(t, err)
			n, err := io.Copy(io.Discard, p.Stdout())
			require.NoError(t, err)
			require.Equal(t, int64(8<<20), n)
			res, err := p.Wait()
			require.NoError(t, err)
			require.False(t, res.OutputKilled)
			require.Equal(t, 0, res.ExitCode)
			// Standard error is collected by the sandbox and capped as Run's.
			p, err = sb.Start(t.Context(), rollout.Command{Shell: "yes >&2", Timeout: 30 * time.Second})
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, p.Stdout())
			require.NoError(t, err)
			res, err = p.Wait()
			require.NoError(t, err)
			require.True(t, res.OutputKilled)
			require.False(t, res.TimedOut)
		})
		t.Run(mode.name+"/context end", func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, newFactory(t, mode.cfg))
			ctx, cancel := context.WithCancel(t.Context())
			p, err := sb.Start(ctx, rollout.Command{Shell: "echo started; sleep 100"})
			require.NoError(t, err)
			_, err = bufio.NewReader(p.Stdout()).ReadString('\n')
			require.NoError(t, err)
			cancel()
			_, err = p.Wait()
			require.ErrorIs(t, err, context.Canceled)
		})
		t.Run(mode.name+"/Close kills", func(t *testing.T) {
			t.Parallel()
			f := newFactory(t, mode.cfg)
			sb, err := f.NewSandbox(t.Context())
			require.NoError(t, err)
			p, err := sb.(rollout.Starter).Start(t.Context(), rollout.Command{Shell: "echo started; sleep 100"})
			require.NoError(t, err)
			_, err = bufio.NewReader(p.Stdout()).ReadString('\n')
			require.NoError(t, err)
			require.NoError(t, sb.Close())
			_, err = p.Wait()
			require.ErrorIs(t, err, bwrap.ErrClosed)
			_, err = sb.(rollout.Starter).Start(t.Context(), rollout.Command{Shell: "true"})
			require.ErrorIs(t, err, bwrap.ErrClosed)
		})
	}
}

func withKillLimit(cfg bwrap.Config, n int64) bwrap.Config {
	cfg.KillOutputLimit = n
	return cfg
}

func TestStartRefusesBadCommands(t *testing.T) {
	sb := newSandbox(t, newFactory(t, bwrap.Config{}))
	for _, c := range []rollout.Command{
		{Shell: "cat", Stdin: []byte("x")},
		{},
		{Shell: "true", Timeout: -time.Second},
		{Shell: "true", Dir: "../x"},
	} {
		_, err := sb.Start(t.Context(), c)
		require.ErrorIs(t, err, bwrap.ErrInvalidCommand, "%+v", c)
	}
}
