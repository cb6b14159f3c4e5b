package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

func TestExitCode(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want int
	}{
		"nil":        {nil, 0},
		"help":       {fmt.Errorf("x: %w", flag.ErrHelp), 0},
		"flag value": {cli.AtLeast("groups", 0, 1), 2},
		"joined":     {errors.Join(nil, cli.AtLeast("topk", -1, 1)), 2},
		"setup":      {fmt.Errorf("%w: no sandbox", cli.ErrSetup), 2},
		"other":      {errors.New("boom"), 1},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, cli.ExitCode(tc.err)) })
	}
	assert.Nil(t, cli.AtLeast("groups", 1, 1))
	assert.EqualError(t, cli.AtLeast("groups", 0, 1), "-groups 0: must be at least 1")
}

func TestParseNamesTheFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	fs.Int("groups", 1, "")
	err := cli.Parse(fs, []string{"-groups", "many"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-groups")
	assert.Equal(t, 2, cli.ExitCode(err))
	assert.ErrorIs(t, cli.Parse(fs, []string{"-h"}), flag.ErrHelp)
}

// missing points cli's paths at a file that does not exist for the test's duration.
func missing(t *testing.T, p *string) {
	old := *p
	*p = t.TempDir() + "/missing"
	t.Cleanup(func() { *p = old })
}

func TestSandboxWithoutBubblewrapRunsScriptedCommandsUnconfined(t *testing.T) {
	missing(t, &cli.BwrapPath)
	var out bytes.Buffer
	f, err := cli.Sandbox(context.Background(), true, &out)
	require.NoError(t, err)
	assert.True(t, f.Unconfined())
	assert.Contains(t, out.String(), "UNCONFINED: bubblewrap (bwrap) not found")
	assert.Contains(t, out.String(), "apt-get install -y --no-install-recommends bubblewrap")

	sb, err := f.NewSandbox(context.Background())
	require.NoError(t, err)
	defer sb.Close()
	res, err := sb.Run(context.Background(), rollout.Command{Shell: "python3 -c 'print(6*7)'"})
	require.NoError(t, err)
	assert.Equal(t, "42\n", string(res.Stdout))
	assert.True(t, res.Unconfined, "the result says it ran unconfined")
}

func TestSandboxRefusesModelCodeWithoutBubblewrap(t *testing.T) {
	missing(t, &cli.BwrapPath)
	var out bytes.Buffer
	_, err := cli.Sandbox(context.Background(), false, &out)
	require.ErrorIs(t, err, bwrap.ErrBwrapNotFound)
	assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends bubblewrap")
	assert.Empty(t, out.String())
}

func TestSandboxWithoutPythonStopsWithTheInstallCommand(t *testing.T) {
	missing(t, &cli.Python)
	for _, scriptedOnly := range []bool{true, false} {
		_, err := cli.Sandbox(context.Background(), scriptedOnly, new(bytes.Buffer))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "python3 not found")
		assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends python3")
	}
}

func TestProgressCountsRolloutsInFlight(t *testing.T) {
	f, err := cli.Sandbox(context.Background(), true, new(bytes.Buffer))
	require.NoError(t, err)
	var w bytes.Buffer // not a terminal: nothing is drawn
	p := cli.NewProgress(&w, f, 2)
	defer p.Close()
	a, err := p.NewSandbox(context.Background())
	require.NoError(t, err)
	b, err := p.NewSandbox(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, p.InFlight())
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	assert.Equal(t, 1, p.InFlight(), "a second Close counts once")
	p.GroupDone()
	assert.Equal(t, 1, p.Groups())
	require.NoError(t, b.Close())
	assert.Zero(t, p.InFlight())
	assert.Empty(t, w.String())
	d, ok := a.(interface{ Dir() string })
	require.True(t, ok, "the workspace directory is forwarded")
	assert.NotEmpty(t, d.Dir())
}
