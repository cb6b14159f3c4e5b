package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/rollout"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

func TestProgressNeverSharesTheLogsTerminal(t *testing.T) {
	_, tty := openPTY(t)
	var file bytes.Buffer
	tests := []struct {
		name        string
		stdout, bar io.Writer
		want        io.Writer
	}{
		{name: "logs and bar on one terminal: no bar", stdout: tty, bar: tty, want: io.Discard},
		{name: "logs to a file, bar on the terminal", stdout: &file, bar: tty, want: tty},
		{name: "logs to a file, bar to a pipe (drawn nowhere)", stdout: &file, bar: &file, want: &file},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, tc.want == cli.ProgressWriter(tc.stdout, tc.bar), "the bar goes to %T", cli.ProgressWriter(tc.stdout, tc.bar))
		})
	}
}

// specFactory makes plain sandboxes for every spec and records the specs.
type specFactory struct {
	rollout.SandboxFactory
	specs []rollout.SandboxSpec
}

func (f *specFactory) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	f.specs = append(f.specs, spec)
	return f.NewSandbox(ctx)
}

func TestProgressForwardsRepositorySandboxes(t *testing.T) {
	ctx := context.Background()
	base, err := cli.Sandbox(ctx, true, io.Discard)
	require.NoError(t, err)
	inner := &specFactory{SandboxFactory: base}
	p := cli.NewProgress(io.Discard, inner, 1)
	defer p.Close()

	spec := rollout.SandboxSpec{Image: "oci-layout:/x", WorkDir: "/testbed"}
	sb, err := p.NewSandboxFor(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, []rollout.SandboxSpec{spec}, inner.specs)
	assert.Equal(t, 1, p.InFlight(), "a repository task's sandbox is counted")
	_, isStarter := sb.(rollout.Starter)
	assert.True(t, isStarter)
	r, ok := sb.(rollout.Restorer)
	require.True(t, ok, "Restore is forwarded")
	require.NoError(t, r.Restore(ctx))
	require.NoError(t, sb.Close())
	assert.Equal(t, 0, p.InFlight())

	plain := cli.NewProgress(io.Discard, rollout.SandboxFactoryFunc(base.NewSandbox), 1)
	defer plain.Close()
	_, err = plain.NewSandboxFor(ctx, spec)
	require.ErrorIs(t, err, agenticopd.ErrNoSpecFactory)
}
