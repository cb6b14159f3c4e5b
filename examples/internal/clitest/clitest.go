// Package clitest checks the flag handling every example program shares: -h says
// what the program does, lists its flags, each with its one meaning across the
// programs (cli.Meaning), and exits 0; a bad flag value is an error that names the
// flag.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
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

// CheckFlags runs run with -h and with every bad command line. -h must give exit
// code 0 and print a first line "NAME: what the program does", then the flags:
// exactly those in flags, each with a usage that begins with its meaning in
// cli.Meaning (so that no name means two things in two programs). Each bad line must
// fail, before any work, with an error that names its flag and exit code 2.
func CheckFlags(t *testing.T, run Run, flags []string, bad []BadLine) {
	t.Helper()
	for _, h := range []string{"-h", "-help"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{h}, &out)
		if !errors.Is(err, flag.ErrHelp) || cli.ExitCode(err) != 0 {
			t.Errorf("%s: got error %v (exit code %d), want flag.ErrHelp and 0", h, err, cli.ExitCode(err))
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		if name, about, ok := strings.Cut(first, ": "); !ok || strings.Contains(name, " ") || len(about) < 20 {
			t.Errorf("%s: the first line does not say what the program does (\"NAME: …\"): %q", h, first)
		}
		usages := ParseUsage(out.String())
		for _, f := range flags {
			if _, ok := usages[f]; !ok {
				t.Errorf("%s: usage does not list -%s:\n%s", h, f, out.String())
			}
		}
		for name, usage := range usages {
			if !slices.Contains(flags, name) {
				t.Errorf("%s: usage lists -%s, which the test does not expect", h, name)
			}
			meaning, ok := cli.Meaning(name)
			switch {
			case !ok:
				t.Errorf("-%s has no meaning in cli.Meaning's table", name)
			case usage != meaning && !strings.HasPrefix(usage, meaning+" ("):
				t.Errorf("-%s: usage %q is not its meaning %q (with details in parentheses)", name, usage, meaning)
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

// ParseUsage reads the flags and their usage texts from the output of
// flag.PrintDefaults: a line "  -name [type]" and the usage on the lines after it
// that start with a tab (joined with a space), without the " (default …)" the flag
// package adds.
func ParseUsage(out string) map[string]string {
	usages := map[string]string{}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			fields := strings.Fields(strings.TrimPrefix(line, "  -"))
			name = fields[0]
			if _, rest, ok := strings.Cut(line, "\t"); ok { // a one-letter flag's usage is on its line
				usages[name] = rest
			} else {
				usages[name] = ""
			}
		case name != "" && strings.HasPrefix(line, "    \t"):
			u := strings.TrimPrefix(line, "    \t")
			if usages[name] != "" {
				u = usages[name] + " " + u
			}
			usages[name] = u
		default:
			name = ""
		}
	}
	for n, u := range usages {
		if i := strings.LastIndex(u, " (default "); i >= 0 && strings.HasSuffix(u, ")") {
			usages[n] = u[:i]
		}
	}
	return usages
}
