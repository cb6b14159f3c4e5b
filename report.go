package agenticopd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/vllm"
)

// Report returns the group as the HTML inspector shows it (package report): each
// rollout's tokens with their segment kinds, masks, sampling logprobs, the teacher's
// logprob of each scored token and top-K rows, its hints at the generation prompt of
// the turn they are for, its reward's breakdown, and the group's metrics.
func (g *Group) Report() report.Group {
	out := report.Group{Title: g.Task.ID, Metrics: g.Metrics}
	if g.Dropped != "" {
		out.Note = "dropped: " + g.Dropped + " (no judge or teacher request)"
	}
	for i, r := range g.Rollouts {
		t := r.Trajectory
		n := len(t.Tokens)
		s := report.Sequence{
			Label: "rollout " + strconv.Itoa(i),
			Score: r.Reward.Reward,
			Breakdown: []report.Term{
				{Name: "correctness", Value: num(r.Reward.Correctness)},
				{Name: "efficiency", Value: num(r.Reward.Efficiency)},
				{Name: "tool use", Value: num(r.Reward.ToolUsage)},
			},
			Info: []report.Term{
				{Name: "turns", Value: strconv.Itoa(t.TurnsUsed)},
				{Name: "stop", Value: string(t.Stop)},
				{Name: "tests", Value: string(r.Verification.Rule)},
			},
			Tokens:          t.Tokens,
			Kinds:           make([]report.Kind, n),
			StudentLogprobs: make([]float64, n),
		}
		for _, seg := range t.Segments {
			k := kindOf(seg.Kind)
			for p := seg.Start; p < seg.End && p < n; p++ {
				s.Kinds[p] = k
			}
		}
		for p := range n {
			s.StudentLogprobs[p] = math.NaN()
			if s.Kinds[p] == report.KindGenerated {
				s.StudentLogprobs[p] = float64(t.Logprobs[p])
			}
		}
		if g.Data != nil && i < g.Data.Len() {
			s.Masked = make([]bool, n)
			for p := range min(n, len(g.Data.Masks[i])) {
				s.Masked[p] = g.Data.Masks[i][p] < 0
			}
			if i < len(g.Data.Distill) && g.Data.Distill[i].Len() == n {
				s.Rows = g.Data.Distill[i]
			}
		}
		if i < len(g.OPD.Sequences) {
			seq := &g.OPD.Sequences[i]
			if rows := &seq.Rows; rows.Len() == n && len(rows.TokenLogprobs) == n {
				s.TeacherLogprobs = make([]float64, n)
				for p := range n {
					s.TeacherLogprobs[p] = math.NaN()
					if rows.Scored(p) {
						s.TeacherLogprobs[p] = float64(rows.TokenLogprobs[p])
					}
				}
			}
			for _, tr := range seq.Turns {
				if judge.Strip(tr.Hint.Text) == "" || tr.Turn < 0 || tr.Turn >= len(t.Turns) {
					continue
				}
				s.Hints = append(s.Hints, report.Hint{Pos: t.Turns[tr.Turn].GenPromptStart, Text: tr.Hint.Text})
			}
		}
		out.Sequences = append(out.Sequences, s)
	}
	return out
}

func kindOf(k rollout.SegmentKind) report.Kind {
	switch k {
	case rollout.SegSampled:
		return report.KindGenerated
	case rollout.SegDelta:
		return report.KindTool
	case rollout.SegHint:
		return report.KindHint
	default:
		return report.KindPrompt
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// detokenizer returns the policy's detokenizer for the report: a *vllm.Client, or a
// *vllm.Pool's first client (every server of a pool serves the same model); nil when
// the policy has none, so the page shows ids.
func detokenizer(p any) report.Detokenizer {
	switch v := p.(type) {
	case report.Detokenizer:
		return v
	case *vllm.Pool:
		if cs := v.Clients(); len(cs) > 0 {
			return cs[0]
		}
	}
	return nil
}

// processReport is the page Process writes to Config.ReportPath. Its first failure
// stops the page; Process returns it after writing every group.
type processReport struct {
	path   string
	f      *os.File
	rw     *report.Writer
	err    error
	groups int // groups on the page
}

// openReport creates the page at path, or returns nil for path "".
func (e *Env) openReport(path string) (*processReport, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("agenticopd: process: report: %w", err)
	}
	rw, err := report.NewWriter(f, report.Options{Title: "agenticopd report", Detokenizer: detokenizer(e.cfg.Policy)})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("agenticopd: process: report %s: %w", path, err)
	}
	return &processReport{path: path, f: f, rw: rw}, nil
}

// add adds g to the page, unless an earlier group failed.
func (r *processReport) add(ctx context.Context, g *Group, log *slog.Logger) {
	if r == nil || r.err != nil {
		return
	}
	if err := r.rw.Add(ctx, g.Report()); err != nil {
		r.err = err
		log.Warn("report: the page stops here", "path", r.path, "err", err)
		return
	}
	r.groups++
}

// close finishes the page and returns its first failure. When the run failed (runErr)
// or the page did, the page is closed as the page of a failed run, and says why.
func (r *processReport) close(ctx context.Context, runErr error) error {
	if r == nil {
		return nil
	}
	var cause error
	switch {
	case runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()):
		cause = fmt.Errorf("stopped by its caller before all groups were written (%w)", runErr)
	case runErr != nil:
		cause = runErr
	}
	if r.err != nil {
		cause = errors.Join(cause, fmt.Errorf("the page stopped after %d groups: %w", r.groups, r.err))
	}
	var err error
	if cause != nil {
		err = r.rw.CloseWithError(cause)
	} else {
		err = r.rw.Close()
	}
	if r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return fmt.Errorf("agenticopd: process: report %s: %w", r.path, r.err)
	}
	return nil
}
