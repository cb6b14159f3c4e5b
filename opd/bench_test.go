package opd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
)

// longGroup is four rollouts of 15 turns each (about 12k tokens per rollout), with a
// tool result of 400 characters after every turn but the last.
func longGroup() []*rollout.Trajectory {
	var out []*rollout.Trajectory
	for range 4 {
		b := newTraj(system(strings.Repeat("s", 500)), user(strings.Repeat("t", 300)))
		for turn := range 15 {
			b.assistant(asst(strings.Repeat("a", 300), toolCall("terminal", `{"command":"python test_solution.py"}`)...))
			if turn < 14 {
				b.then(tool(strings.Repeat("o", 400)))
			}
		}
		out = append(out, b.build())
	}
	return out
}

// BenchmarkDistill compares the placements on a group where every turn pair gets a
// hint. teacher-tokens/group is the prefill the teacher pays: Inline sends each rollout
// once (O(L)); TaskPrompt re-sends the context for every hinted turn (O(P·L)).
func BenchmarkDistill(b *testing.B) {
	always := judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		h := "Read the whole test output before editing."
		return judge.Hint{Text: h, Votes: []judge.Vote{{Score: 1, Hint: h}}}, ctx.Err()
	})
	trajs := longGroup()
	for _, p := range []opd.Placement{opd.Inline, opd.TaskPrompt} {
		b.Run(p.String(), func(b *testing.B) {
			tmpl := &fakeTemplate{}
			d, err := opd.New(opd.Config{Judge: always, Teacher: (&fakeTeacher{}).scorer(), Templater: tmpl, Renderer: tmpl, Placement: p})
			if err != nil {
				b.Fatal(err)
			}
			var m opd.Metrics
			for b.Loop() {
				res, err := d.Distill(context.Background(), trajs)
				if err != nil {
					b.Fatal(err)
				}
				m = res.Metrics
			}
			b.ReportMetric(float64(m.TeacherPromptTokens), "teacher-tokens/group")
			b.ReportMetric(float64(m.TeacherSequences), "teacher-seqs/group")
			b.ReportMetric(float64(m.TeacherPositions), "scored-positions/group")
		})
	}
}
