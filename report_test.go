package agenticopd_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/rollout"
)

func TestGroupReportCarriesSegmentsHintsAndTeacherLogprobs(t *testing.T) {
	f := newFixture(t, nil)
	g, err := f.env.CollectGroup(context.Background(), f.task)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	rg := g.Report()
	assert.Equal(t, f.task.ID, rg.Title)
	assert.Equal(t, g.Metrics, rg.Metrics)
	require.Len(t, rg.Sequences, len(g.Rollouts))
	hints := 0
	for i, s := range rg.Sequences {
		tr := g.Rollouts[i].Trajectory
		rows := &g.OPD.Sequences[i].Rows
		assert.Equal(t, tr.Tokens, s.Tokens)
		assert.Equal(t, g.Rollouts[i].Reward.Reward, s.Score)
		for _, seg := range tr.Segments {
			want := map[rollout.SegmentKind]report.Kind{
				rollout.SegSampled: report.KindGenerated, rollout.SegDelta: report.KindTool,
			}[seg.Kind]
			for p := seg.Start; p < seg.End; p++ {
				require.Equal(t, want, s.Kinds[p], "segment %v at %d", seg.Kind, p)
				if seg.Kind == rollout.SegSampled {
					assert.Equal(t, float64(tr.Logprobs[p]), s.StudentLogprobs[p])
				} else {
					assert.True(t, math.IsNaN(s.StudentLogprobs[p]))
				}
			}
		}
		for p := range tr.Tokens {
			assert.Equal(t, g.Data.Masks[i][p] < 0, s.Masked[p])
			if rows.Scored(p) {
				assert.Equal(t, float64(rows.TokenLogprobs[p]), s.TeacherLogprobs[p])
			} else {
				assert.True(t, math.IsNaN(s.TeacherLogprobs[p]))
			}
		}
		assert.Same(t, g.Data.Distill[i], s.Rows)
		for _, h := range s.Hints {
			hints++
			// A hint sits where its turn's generation prompt starts.
			found := false
			for _, turn := range tr.Turns {
				found = found || turn.GenPromptStart == h.Pos
			}
			assert.True(t, found, "hint at %d is at a generation prompt", h.Pos)
		}
	}
	assert.Equal(t, int(g.Metrics["opd/total_hints"]), hints)
	assert.Positive(t, hints)
}

// TestGroupReportFiguresMatchTheJSONL: the quickstart renders its page from groups in
// memory (Group.Report), examples/inspect renders the JSON Lines the trainer gets; for
// the same group both give the same figures (scored positions, positions whose
// sampled token is outside the teacher's top-K, mean Δ), with and without
// ref_logprobs in the file.
func TestGroupReportFiguresMatchTheJSONL(t *testing.T) {
	for _, c := range []struct {
		name  string
		asRef bool
	}{
		{"distill rows only", false},
		{"with TeacherLogprobsAsRef", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *agenticopd.Config) { cfg.TeacherLogprobsAsRef = c.asRef })
			g, err := f.env.CollectGroup(context.Background(), f.task)
			require.NoError(t, err)
			require.Empty(t, g.Dropped)
			var buf bytes.Buffer
			require.NoError(t, atropos.WriteJSONL(&buf, g.Data))
			var fromFile report.Group
			require.NoError(t, atropos.ReadJSONL(&buf, func(d *atropos.ScoredDataGroup) error {
				fromFile = report.FromScoredData("from jsonl", d)
				return nil
			}))
			mem := g.Report()
			require.Len(t, fromFile.Sequences, len(mem.Sequences))
			outside := 0
			for i := range mem.Sequences {
				want, err := mem.Sequences[i].Figures()
				require.NoError(t, err)
				got, err := fromFile.Sequences[i].Figures()
				require.NoError(t, err)
				if d := cmp.Diff(want, got, cmpopts.EquateNaNs()); d != "" {
					t.Errorf("rollout %d: figures (-memory +jsonl):\n%s", i, d)
				}
				outside += want.OutsideTopK
			}
			require.Positive(t, outside, "the fixture has sampled tokens outside the teacher's top-%d", topK)
		})
	}
}

func TestProcessWritesTheReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.html")
	var titles []string
	f := newFixture(t, func(c *agenticopd.Config) {
		c.ReportPath = path
		c.OnGroup = func(g *agenticopd.Group) { titles = append(titles, g.Task.ID) }
	})
	var out bytes.Buffer
	require.NoError(t, f.env.Process(context.Background(), 2, &out))
	page, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(page)
	assert.Equal(t, 2, strings.Count(text, `<section class="group"`))
	for _, id := range titles {
		assert.Contains(t, text, "<h2>"+id+"</h2>")
	}
	assert.True(t, strings.HasSuffix(strings.TrimSpace(text), "</html>"), "the page is complete")
	assert.Positive(t, f.sim.RequestCount("/detokenize"), "token text from the policy server")
}

func TestProcessReportFailures(t *testing.T) {
	t.Run("a file that cannot be created fails before any group", func(t *testing.T) {
		f := newFixture(t, func(c *agenticopd.Config) { c.ReportPath = filepath.Join(t.TempDir(), "missing", "report.html") })
		var out bytes.Buffer
		err := f.env.Process(context.Background(), 1, &out)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "report")
		assert.Zero(t, out.Len())
		assert.Zero(t, f.sim.RequestCount("/v1/completions"))
	})
	t.Run("a detokenizer failure keeps the groups and says so", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.html")
		f := newFixture(t, func(c *agenticopd.Config) { c.ReportPath = path })
		f.sim.SetError("/detokenize", 500, `{"error":{"message":"down","type":"InternalServerError","code":500}}`)
		var out bytes.Buffer
		err := f.env.Process(context.Background(), 2, &out)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "all 2 groups were written")
		assert.Equal(t, 2, strings.Count(out.String(), "\n"), "both groups are in w")
	})
}
