package report_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/report"
)

func TestFigures(t *testing.T) {
	seq := outsideSeq()
	noStudent := outsideSeq()
	noStudent.StudentLogprobs = nil
	noTeacher := outsideSeq()
	noTeacher.TeacherLogprobs = nil
	noRows := outsideSeq()
	noRows.Rows = nil
	sentinel := outsideSeq()
	sentinel.StudentLogprobs[4] = 1 // Atropos's masked sentinel: no logprob
	short := outsideSeq()
	short.TeacherLogprobs = short.TeacherLogprobs[:5]
	for _, c := range []struct {
		name string
		seq  report.Sequence
		want report.Figures
		err  string
	}{
		{name: "in memory", seq: seq,
			want: report.Figures{Scored: 5, OutsideTopK: 2, DeltaPositions: 3, MeanDelta: (0.4 - 0.6 - 1.5) / 3}},
		{name: "from JSON Lines", seq: viaJSONL(t, seq, false),
			want: report.Figures{Scored: 5, OutsideTopK: 2, DeltaPositions: 3, MeanDelta: (0.4 - 0.6 - 1.5) / 3}},
		{name: "without the exact teacher logprobs", seq: noTeacher,
			want: report.Figures{Scored: 5, OutsideTopK: 2, DeltaPositions: 3, MeanDelta: (0.4 - 0.6 - 1.5) / 3}},
		{name: "without student logprobs", seq: noStudent,
			want: report.Figures{Scored: 5, OutsideTopK: 2, MeanDelta: math.NaN()}},
		{name: "a positive student logprob is none", seq: sentinel,
			want: report.Figures{Scored: 5, OutsideTopK: 2, DeltaPositions: 2, MeanDelta: (-0.6 - 1.5) / 2}},
		{name: "without rows", seq: noRows, want: report.Figures{MeanDelta: math.NaN()}},
		{name: "a slice of the wrong length", seq: short, err: "5 TeacherLogprobs for 12 tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.seq.Figures()
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			if d := cmp.Diff(c.want, got, cmpopts.EquateNaNs(), cmpopts.EquateApprox(0, 1e-6)); d != "" {
				t.Errorf("Figures (-want +got):\n%s", d)
			}
		})
	}
}
