package report_test

import (
	"bytes"
	"context"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/report"
)

// teacherEntry is one scored position of outsideSeq.
type teacherEntry struct {
	pos     int
	row     []int32
	lps     []float32
	exact   float64 // the teacher's logprob of the sampled token (as the opd rows keep it)
	student float64
	sampled int32
	inside  bool // sampled is in row
}

// outsideEntries are the scored positions of outsideSeq: the teacher disfavours the
// sampled token at 5 and 7 so much that it is outside its top-6, and there the row's
// lowest logprob (the bound) is above the student's logprob, so a colour taken from
// the bound would read "teacher > student" where the teacher likes the token least.
var outsideEntries = []teacherEntry{
	{pos: 4, sampled: 50, row: []int32{50, 51, 52, 53, 54, 55}, lps: []float32{-0.1, -0.4, -0.6, -0.7, -0.9, -1.1}, exact: -0.1, student: -0.5, inside: true},
	{pos: 5, sampled: 60, row: []int32{61, 62, 63, 64, 65, 66}, lps: []float32{-0.2, -0.3, -0.5, -0.6, -0.8, -1}, exact: -9, student: -3},
	{pos: 6, sampled: 70, row: []int32{71, 72, 70, 73, 74, 75}, lps: []float32{-0.3, -0.5, -0.8, -1, -1.2, -1.4}, exact: -0.8, student: -0.2, inside: true},
	{pos: 7, sampled: 80, row: []int32{81, 82, 83, 84, 85, 86}, lps: []float32{-0.5, -0.8, -1, -1.3, -1.7, -2}, exact: -12, student: -6},
	{pos: 8, sampled: 90, row: []int32{91, 92, 93, 94, 95, 90}, lps: []float32{-0.4, -0.6, -1, -1.5, -2, -2.5}, exact: -2.5, student: -1, inside: true},
}

// outsideSeq is a rollout as the root package's Group.Report builds it from a group
// in memory: kinds, masks, the student's logprobs at generated tokens, the teacher's
// rows and, at every scored position, the teacher's exact logprob of the sampled token
// (also where that token is outside the rows).
func outsideSeq() report.Sequence {
	const n = 12
	s := report.Sequence{
		Label:           "sequence 0",
		Score:           0.5,
		Tokens:          []int32{10, 11, 12, 40, 50, 60, 70, 80, 90, 41, 20, 21},
		Kinds:           make([]report.Kind, n),
		Masked:          make([]bool, n),
		StudentLogprobs: make([]float64, n),
		TeacherLogprobs: make([]float64, n),
		Rows:            atropos.NewDistillRows(n),
	}
	for p := range n {
		s.StudentLogprobs[p], s.TeacherLogprobs[p] = math.NaN(), math.NaN()
		switch {
		case p < 3:
			s.Kinds[p], s.Masked[p] = report.KindPrompt, true
		case p >= 10:
			s.Kinds[p], s.Masked[p] = report.KindTool, true
		default:
			s.Kinds[p] = report.KindGenerated
			s.StudentLogprobs[p] = -0.05
		}
	}
	for _, e := range outsideEntries {
		if s.Tokens[e.pos] != e.sampled {
			panic("outsideEntries do not match outsideSeq")
		}
		if err := s.Rows.SetRow(e.pos, e.row, e.lps); err != nil {
			panic(err)
		}
		s.StudentLogprobs[e.pos], s.TeacherLogprobs[e.pos] = e.student, e.exact
	}
	return s
}

// viaJSONL is s as the trainer receives it: an Atropos group written to JSON Lines and
// read back (with ref_logprobs when asRef, as TeacherLogprobsAsRef writes them), then
// taken in by FromScoredData, as examples/inspect does.
func viaJSONL(t *testing.T, s report.Sequence, asRef bool) report.Sequence {
	t.Helper()
	n := len(s.Tokens)
	seq := atropos.Sequence{Tokens: make([]int, n), Masks: make([]int, n), Score: s.Score,
		InferenceLogprobs: make([]float64, n), Distill: s.Rows}
	if asRef {
		seq.RefLogprobs = make([]float64, n)
	}
	for p, id := range s.Tokens {
		seq.Tokens[p], seq.Masks[p], seq.InferenceLogprobs[p] = int(id), int(id), s.StudentLogprobs[p]
		if s.Masked[p] {
			seq.Masks[p], seq.InferenceLogprobs[p] = atropos.MaskIgnore, atropos.MaskedLogprob
		}
		if asRef {
			seq.RefLogprobs[p] = atropos.MaskedLogprob
			if ids, _ := s.Rows.Row(p); len(ids) > 0 {
				seq.RefLogprobs[p] = s.TeacherLogprobs[p]
			}
		}
	}
	g := &atropos.ScoredDataGroup{}
	require.NoError(t, g.Add(seq))
	var buf bytes.Buffer
	require.NoError(t, atropos.WriteJSONL(&buf, g))
	var back []report.Sequence
	require.NoError(t, atropos.ReadJSONL(&buf, func(g *atropos.ScoredDataGroup) error {
		back = append(back, report.FromScoredData("from jsonl", g).Sequences...)
		return nil
	}))
	require.Len(t, back, 1)
	return back[0]
}

// tableRow returns the cells of each rollout's row in the page's table.
func tableRow(t *testing.T, s report.Sequence) []string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, report.Write(context.Background(), &buf, report.Options{}, report.Group{Title: "g", Sequences: []report.Sequence{s}}))
	doc, err := html.Parse(&buf)
	require.NoError(t, err)
	rows := findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-seq") != "" })
	require.Len(t, rows, 1)
	var cells []string
	for _, td := range findAll(rows[0], func(n *html.Node) bool { return n.Data == "td" }) {
		cells = append(cells, attr(td, "class")+"="+textOf(td))
	}
	return cells
}

// TestTheTableIsTheSameFromMemoryAndFromJSONL: the quickstart's page (a group in
// memory, with the teacher's exact logprob of every sampled token) and
// examples/inspect's page of the same group read from JSON Lines show the same
// numbers: the same count outside the top-K, the same mean Δ.
func TestTheTableIsTheSameFromMemoryAndFromJSONL(t *testing.T) {
	mem := outsideSeq()
	want := tableRow(t, mem)
	require.Contains(t, want, "outside=2", "positions 5 and 7 are outside the teacher's top-K")
	for _, c := range []struct {
		name  string
		asRef bool
	}{
		{"distill rows only", false},
		{"with ref_logprobs", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tableRow(t, viaJSONL(t, mem, c.asRef))
			// JSON Lines carry no hints: their count is unknown, not 0.
			want := slices.Clone(want)
			want[slices.Index(want, "hints=0")] = "hints=–"
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the page's row from JSON Lines differs from the one in memory (-memory +jsonl):\n%s", d)
			}
		})
	}
}
