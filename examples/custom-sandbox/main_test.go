package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAuditDeniesAndLogs(t *testing.T) {
	ctx := context.Background()
	base, err := cli.Sandbox(ctx, true, new(bytes.Buffer))
	require.NoError(t, err)
	var log bytes.Buffer
	a := &Audit{Factory: base, Deny: []string{"pip install"}, Log: slog.New(slog.NewTextHandler(&log, nil))}
	sb, err := a.NewSandbox(ctx)
	require.NoError(t, err)
	defer sb.Close()

	res, err := sb.Run(ctx, rollout.Command{Shell: "touch marker &&   pip    install numpy"})
	require.NoError(t, err, "a denial is a tool result, not a sandbox failure")
	assert.Equal(t, DeniedExit, res.ExitCode)
	assert.Contains(t, string(res.Stderr), `denied: commands containing "pip install" are not allowed`)
	_, err = sb.ReadFile("marker")
	assert.Error(t, err, "nothing of a denied command ran")

	res, err = sb.Run(ctx, rollout.Command{Shell: "touch marker && echo ok"})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	_, err = sb.ReadFile("marker")
	assert.NoError(t, err)

	ran, denied := a.Counts()
	assert.Equal(t, 1, ran)
	assert.Equal(t, 1, denied)
	assert.Contains(t, log.String(), `msg="command denied" sandbox=1`)
	assert.Regexp(t, `msg=command sandbox=1 command="touch marker && echo ok" exit=0 duration=\d`, log.String())

	d, ok := sb.(interface{ Dir() string })
	require.True(t, ok)
	assert.NotEmpty(t, d.Dir(), "the workspace directory is forwarded")
}

func TestCustomSandboxTheModelReadsTheDenial(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	require.NoError(t, run(context.Background(), []string{"-groups", "1", "-out", dir}, &out), out.String())
	text := out.String()
	var groups int
	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, atropos.ReadJSONL(f, func(*atropos.ScoredDataGroup) error { groups++; return nil }))
	assert.Equal(t, 1, groups, "-out holds the group")
	assert.Regexp(t, `rollout \d saw: .*denied: commands containing \\"pip install\\"`, text, "the denial is in the tool message")
	m := regexp.MustCompile(`commands: (\d+) run, (\d+) denied`).FindStringSubmatch(text)
	require.NotNil(t, m)
	ran, _ := strconv.Atoi(m[1])
	denied, _ := strconv.Atoi(m[2])
	assert.Positive(t, ran, "the verification and the allowed commands ran")
	assert.Positive(t, denied)
	assert.Regexp(t, `msg=command sandbox=\d+ .* duration=\d`, text)

	// The student tries to install once per rollout, reads the denial and runs the tests
	// without it: no rollout is denied twice, and the agent's own command ran (not only
	// the verifier's "python3 -I …").
	for _, m := range regexp.MustCompile(`rollout (\d+) saw: .*denied:`).FindAllStringSubmatch(text, -1) {
		assert.Equal(t, 1, strings.Count(text, "rollout "+m[1]+" saw: "), "rollout %s was denied more than once", m[1])
	}
	assert.Regexp(t, `msg=command sandbox=\d+ command="python test_solution.py" exit=\d+`, text,
		"an agent's command ran and was logged after the denial")
}

func TestCustomSandboxFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"deny", "groups", "out"},
		[]clitest.BadLine{clitest.Bad("groups", "-groups", "0")})
}

// recordingFactory is a SpecFactory over another factory's plain sandboxes that
// records the specs it was asked for.
type recordingFactory struct {
	rollout.SandboxFactory
	specs []rollout.SandboxSpec
}

func (f *recordingFactory) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	f.specs = append(f.specs, spec)
	return f.NewSandbox(ctx)
}

func TestAuditForwardsWhatTheEnvLooksFor(t *testing.T) {
	ctx := context.Background()
	base, err := cli.Sandbox(ctx, true, new(bytes.Buffer))
	require.NoError(t, err)
	inner := &recordingFactory{SandboxFactory: base}
	var log bytes.Buffer
	a := &Audit{Factory: inner, Log: slog.New(slog.NewTextHandler(&log, nil))}

	var f rollout.SandboxFactory = a
	sf, ok := f.(rollout.SpecFactory)
	require.True(t, ok, "the factory forwards NewSandboxFor")
	spec := rollout.SandboxSpec{Image: "oci-layout:/img", WorkDir: "/testbed"}
	sb, err := sf.NewSandboxFor(ctx, spec)
	require.NoError(t, err)
	defer sb.Close()
	assert.Equal(t, []rollout.SandboxSpec{spec}, inner.specs, "the spec reaches the wrapped factory")

	_, ok = sb.(rollout.Starter)
	assert.True(t, ok, "Start is forwarded")
	r, ok := sb.(rollout.Restorer)
	require.True(t, ok, "Restore is forwarded")
	require.NoError(t, r.Restore(ctx))
	_, ok = sb.(interface{ Dir() string })
	assert.True(t, ok, "Dir is forwarded")
	_, ok = sb.(rollout.Searcher)
	assert.False(t, ok, "no Searcher: the bubblewrap sandbox has none")

	res, err := sb.Run(ctx, rollout.Command{Shell: "echo ok"})
	require.NoError(t, err)
	assert.Equal(t, "ok\n", string(res.Stdout))
	assert.Contains(t, log.String(), `command="echo ok"`, "a repository task's sandbox is audited too")

	// NewEnv takes the wrapper for a dataset with a repository task.
	sim := vllmtest.NewServer(t)
	ts, err := tasks.LoadSWE(filepath.Join("..", "..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	_, err = agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), SandboxFactory: a, DisableOPD: true,
		Dataset: append(tasks.Builtin(), ts...), EvalSize: tasks.NoEval})
	require.NoError(t, err)
}
