package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/internal/printcheck"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQuickstartWritesValidGroupsWithRows(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir, "-groups", "2", "-topk", "20"}, &out)
	require.NoError(t, err, out.String())
	first, _, _ := strings.Cut(out.String(), "\n")
	assert.Contains(t, first, "SIMULATOR", "the first line says the backend is a simulator")

	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	groups, rows := 0, 0
	require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		groups++
		require.NoError(t, g.Validate(atropos.ValidateOptions{}))
		for s := range g.Tokens {
			for p := range g.Tokens[s] {
				ids, lps := g.DistillRow(s, p)
				if len(ids) == 0 {
					continue
				}
				rows++
				assert.NotEqual(t, atropos.MaskIgnore, g.Masks[s][p], "row on a token the policy did not generate")
				assert.Len(t, ids, 20)
				assert.Len(t, lps, 20)
			}
		}
		return nil
	}))
	assert.Equal(t, 2, groups)
	assert.Positive(t, rows)
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err, "the inspector is written next to groups.jsonl")
	assert.Equal(t, 2, strings.Count(string(page), `<section class="group"`))
	assert.Contains(t, out.String(), "and the HTML inspector to "+filepath.Join(dir, "report.html"))
	// Per group the task, scores, hints and scored turns; then the metrics.
	text := out.String()
	assert.Equal(t, 2, strings.Count(text, "\ngroup: task "))
	assert.Regexp(t, `rollout \d: score \d\.\d{3} .* \d+ hints, \d+ scored turns`, text)
	assert.Contains(t, text, "    hint: ")
	metrics := strings.Index(text, "\nmetrics:\n")
	require.Positive(t, metrics)
	assert.Greater(t, metrics, strings.LastIndex(text, "\ngroup: task "), "the metrics come last")
	assert.Contains(t, text[metrics:], "train/mean_reward")
	assert.Contains(t, text[metrics:], "opd/total_scored_turns")
	assert.Empty(t, printcheck.FloatNoise(text), "figures print as decimals")
	assert.Empty(t, printcheck.RepeatedPrefix(text))
}

// TestQuickstartTeacherShowsASignal: offline, the frozen-teacher simulator differs
// from the student after a hint, so on hinted turns (the only ones the teacher
// scores) Δ is not zero; and the teacher figures of every rollout are the same in
// the printed lines, in the page written from memory, and in the JSON Lines read back
// as examples/inspect reads them.
func TestQuickstartTeacherShowsASignal(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", dir, "-groups", "1", "-topk", "20"}, &out), out.String())
	first, _, _ := strings.Cut(out.String(), "\n")
	assert.Regexp(t, `^SIMULATOR: .*; a second vllmtest at \S+ plays a frozen teacher \(a simulator too: .*\)`, first)

	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var fromFile []report.Figures
	deltas, nonZero := 0, 0
	require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		for s, seq := range report.FromScoredData("", g).Sequences {
			fig, err := seq.Figures()
			require.NoError(t, err)
			fromFile = append(fromFile, fig)
			for p := range g.Tokens[s] {
				ids, lps := g.DistillRow(s, p)
				if i := slices.Index(ids, int32(g.Tokens[s][p])); i >= 0 {
					deltas++
					if math.Abs(float64(lps[i])-g.InferenceLogprobs[s][p]) > 1e-3 {
						nonZero++
					}
				}
			}
		}
		return nil
	}))
	require.Positive(t, deltas, "scored positions whose sampled token is in the teacher's top-K")
	assert.Positive(t, nonZero, "the teacher's logprob differs from the student's somewhere on hinted turns")
	outside := 0
	for _, fig := range fromFile {
		outside += fig.OutsideTopK
	}
	require.Positive(t, outside, "the run has sampled tokens outside the teacher's top-K")

	// The printed lines: one per rollout, with the figures when the rollout was scored.
	lineRE := regexp.MustCompile(`(?m)^  rollout \d+: .*?(?:, (\d+) scored positions \((\d+) outside the teacher's top-K\), mean Δ logprob in top-K (\S+))?$`)
	lines := lineRE.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, lines, len(fromFile))
	// The page's table, written from the groups in memory.
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	cellRE := regexp.MustCompile(`<td class="scored">(\d+)</td><td class="outside">(\d+)</td><td class="hints">\d+</td><td class="delta">([^<]*)</td>`)
	cells := cellRE.FindAllStringSubmatch(string(page), -1)
	require.Len(t, cells, len(fromFile))
	for i, fig := range fromFile {
		delta := "–"
		if fig.DeltaPositions > 0 {
			delta = strconv.FormatFloat(fig.MeanDelta, 'f', 3, 64)
		}
		want := []string{strconv.Itoa(fig.Scored), strconv.Itoa(fig.OutsideTopK), delta}
		if fig.Scored > 0 {
			assert.Equal(t, want, lines[i][1:], "rollout %d: printed figures", i)
		} else {
			assert.Equal(t, []string{"", "", ""}, lines[i][1:], "rollout %d: nothing scored, no figures printed", i)
		}
		assert.Equal(t, want, cells[i][1:], "rollout %d: the page's table", i)
	}
}

func TestQuickstartSeparateTeacherAndJudge(t *testing.T) {
	teacher := vllmtest.NewServer(t)
	judge := vllmtest.NewServer(t, vllmtest.WithChatScript(scripted.Judge))
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", t.TempDir(), "-groups", "1", "-topk", "20",
		"-teacher-url", teacher.URL, "-judge-url", judge.URL}, &out)
	require.NoError(t, err, out.String())
	scoring := 0
	for _, r := range teacher.Requests() {
		if r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil {
			scoring++
		}
	}
	assert.Positive(t, scoring, "the teacher server scored")
	assert.Positive(t, judge.RequestCount("/v1/chat/completions"), "the judge server judged")
}

func TestQuickstartRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), []string{"-groups", "0"}, &out))
	require.Error(t, run(context.Background(), []string{"-nope"}, &out))
}

func TestQuickstartFlags(t *testing.T) {
	clitest.CheckFlags(t, run,
		[]string{"out", "groups", "group-size", "vllm-url", "model", "teacher-url", "judge-url", "topk", "seed",
			"tasks", "tasks-format", "specs", "image", "image-cache", "hf-cache", "hf-token", "eval-size", "log-json"},
		[]clitest.BadLine{
			clitest.Bad("groups", "-groups", "0"),
			clitest.Bad("groups", "-groups", "two"),
			clitest.Bad("group-size", "-group-size", "-1"),
			clitest.Bad("topk", "-topk", "0"),
			clitest.Bad("seed", "-seed", "x"),
			clitest.Bad("vllm-url", "-vllm-url", "localhost:9001"),
			clitest.Bad("tasks", "-tasks", "tasks.csv"),
			clitest.Bad("tasks-format", "-tasks-format", "csv"),
			clitest.Bad("eval-size", "-eval-size", "-1"),
		})
}

// missing points one of cli's paths at a file that does not exist, for the test.
func missing(t *testing.T, p *string) {
	old := *p
	*p = filepath.Join(t.TempDir(), "missing")
	t.Cleanup(func() { *p = old })
}

func TestQuickstartWithoutBubblewrapRunsUnconfinedAndSaysSo(t *testing.T) {
	missing(t, &cli.BwrapPath)
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", dir, "-groups", "1", "-topk", "20"}, &out), out.String())
	lines := strings.SplitN(out.String(), "\n", 4)
	require.Len(t, lines, 4)
	assert.Contains(t, lines[0], "SIMULATOR")
	assert.Contains(t, lines[1], "UNCONFINED: bubblewrap (bwrap) not found")
	assert.Contains(t, lines[2], "apt-get install -y --no-install-recommends bubblewrap")
	_, err := os.Stat(filepath.Join(dir, "groups.jsonl"))
	assert.NoError(t, err)
}

func TestQuickstartRefusesARealModelWithoutBubblewrap(t *testing.T) {
	missing(t, &cli.BwrapPath)
	srv := vllmtest.NewServer(t)
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir, "-vllm-url", srv.URL}, &out)
	require.ErrorIs(t, err, bwrap.ErrBwrapNotFound)
	assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends bubblewrap")
	assert.NotContains(t, out.String(), "UNCONFINED")
	assert.Zero(t, srv.RequestCount("/v1/completions"), "no rollout started")
}

func TestQuickstartWithoutPythonStopsAtOnce(t *testing.T) {
	missing(t, &cli.Python)
	dir := filepath.Join(t.TempDir(), "out")
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends python3")
	assert.Empty(t, out.String(), "nothing started")
	assert.NoDirExists(t, dir)
}
