// Package clitest checks the flag handling every example program shares: -h prints
// the usage and exits 0, and a bad flag value is an error that names the flag.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
)

// Run is an example's run function.
type Run func(ctx context.Context, args []string, stdout io.Writer) error

// BadLine is a command line with a bad value of Flag.
type BadLine struct {
	Flag string   // without the dash
	Args []string // the command line
}

// Bad returns the BadLine args, whose error must name flag.
func Bad(flag string, args ...string) BadLine { return BadLine{Flag: flag, Args: args} }

// CheckFlags runs run with -h and with every bad command line. -h must print a usage
// naming every flag in flags and give exit code 0; each bad line must fail, before any
// work, with an error that names its flag and exit code 2.
func CheckFlags(t *testing.T, run Run, flags []string, bad []BadLine) {
	t.Helper()
	for _, h := range []string{"-h", "-help"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{h}, &out)
		if !errors.Is(err, flag.ErrHelp) || cli.ExitCode(err) != 0 {
			t.Errorf("%s: got error %v (exit code %d), want flag.ErrHelp and 0", h, err, cli.ExitCode(err))
		}
		for _, f := range flags {
			if !strings.Contains(out.String(), "-"+f+" ") && !strings.Contains(out.String(), "-"+f+"\n") {
				t.Errorf("%s: usage does not list -%s:\n%s", h, f, out.String())
			}
		}
	}
	for _, b := range bad {
		var out bytes.Buffer
		err := run(context.Background(), b.Args, &out)
		switch {
		case err == nil:
			t.Errorf("%q: no error", b.Args)
		case !strings.Contains(err.Error(), "-"+b.Flag):
			t.Errorf("%q: error %q does not name -%s", b.Args, err, b.Flag)
		case cli.ExitCode(err) != 2:
			t.Errorf("%q: exit code %d, want 2", b.Args, cli.ExitCode(err))
		}
	}
}
