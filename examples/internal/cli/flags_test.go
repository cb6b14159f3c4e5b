package cli_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
)

// TestEveryProgramChecksItsFlags holds the rule "one meaning per flag name" across
// the example programs: each program's test calls clitest.CheckFlags, which checks
// every flag its -h lists against cli.Meaning's one table (and that -h says what the
// program does). A new program without that call fails here. minimal is the README's
// program line for line: it has no flags of its own.
func TestEveryProgramChecksItsFlags(t *testing.T) {
	mains, err := filepath.Glob(filepath.Join("..", "..", "*", "main.go"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(mains), 10, "the example programs")
	defs := 0
	for _, m := range mains {
		dir := filepath.Dir(m)
		if filepath.Base(dir) == "minimal" {
			src, err := os.ReadFile(m)
			require.NoError(t, err)
			assert.NotContains(t, string(src), "flag.String", "minimal has no flags of its own")
			continue
		}
		tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		found := false
		for _, f := range tests {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			found = found || strings.Contains(string(src), "clitest.CheckFlags(")
		}
		assert.True(t, found, "%s: no test calls clitest.CheckFlags", dir)

		// Every flag a program defines goes through cli.Usage (or AddTaskFlags), so that
		// its text is the table's.
		src, err := os.ReadFile(m)
		require.NoError(t, err)
		for _, def := range regexp.MustCompile(`fs\.\w+(?:Var)?\((?:&[\w.]+, )?"([\w-]+)", [^\n]*`).FindAllStringSubmatch(string(src), -1) {
			assert.Contains(t, def[0], "cli.Usage(\""+def[1]+"\"", "%s: -%s is not defined with cli.Usage", dir, def[1])
			defs++
		}
	}
	assert.Greater(t, defs, 50, "the flag definitions found")

	// No meaning is left without a program that has the flag.
	used := map[string]bool{}
	for _, dir := range []string{filepath.Join("..", "..", "*", "main.go"), "tasks.go"} {
		files, err := filepath.Glob(dir)
		require.NoError(t, err)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range regexp.MustCompile(`Usage\("([\w-]+)"`).FindAllStringSubmatch(string(src), -1) {
				used[m[1]] = true
			}
		}
	}
	for _, n := range cli.FlagNames() {
		assert.True(t, used[n], "-%s has a meaning but no program has the flag", n)
	}
}

func TestMeaningsAreOnePerName(t *testing.T) {
	names := cli.FlagNames()
	require.NotEmpty(t, names)
	seen := map[string]string{}
	for _, n := range names {
		m, ok := cli.Meaning(n)
		require.True(t, ok, n)
		require.NotEmpty(t, m, n)
		assert.NotContains(t, m, "`", "-%s: a backquote would be taken as the flag's type name", n)
		if other, dup := seen[m]; dup {
			t.Errorf("-%s and -%s have the same meaning %q: one name per meaning", n, other, m)
		}
		seen[m] = n
	}
	assert.Equal(t, "teacher top-K logprobs per scored token (the teacher server's --max-logprobs must allow it) (offline)", cli.Usage("topk", "offline"))
	assert.PanicsWithValue(t, "cli: flag -nope has no meaning in cli.Meaning's table: add it there", func() { cli.Usage("nope") })
}

func TestNewFlagSetSaysWhatTheProgramDoes(t *testing.T) {
	var out bytes.Buffer
	fs := cli.NewFlagSet("demo", "does one thing and says so", &out)
	fs.Int("groups", 2, cli.Usage("groups"))
	fs.String("out", "x", cli.Usage("out", "a.jsonl"))
	err := cli.Parse(fs, []string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.True(t, strings.HasPrefix(out.String(), "demo: does one thing and says so\n\nUsage: go run ./examples/demo [flags]\n"), out.String())
	assert.Equal(t, map[string]string{
		"groups": "number of groups to collect",
		"out":    "directory the program writes its output files to (a.jsonl)",
	}, clitest.ParseUsage(out.String()))
}
