package opd_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
)

// rollout.Template is what the library wires in as Templater and Renderer.
var (
	_ opd.Templater = (*rollout.Template)(nil)
	_ opd.Renderer  = (*rollout.Template)(nil)
)

// toyPolicy renders with the toy ChatML template; it never generates.
type toyPolicy struct{}

func (toyPolicy) Render(_ context.Context, req rollout.RenderRequest) (rollout.Rendered, error) {
	return rollout.Rendered{Tokens: render(req.Messages, req.AddGenerationPrompt)}, nil
}

func (toyPolicy) Generate(context.Context, rollout.GenerateRequest) (rollout.Generation, error) {
	panic("not used")
}

// With a calibrated rollout.Template as Templater, an Inline hint is exactly the
// template's rendering of the hint message.
func TestDistillInlineWithRolloutTemplate(t *testing.T) {
	tmpl, err := rollout.NewTemplate(toyPolicy{}, rollout.TemplateConfig{})
	require.NoError(t, err)
	var calls atomic.Int64
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(), Templater: tmpl, TopK: topK})
	trajs := group()
	res, err := d.Distill(context.Background(), trajs)
	require.NoError(t, err)
	require.Equal(t, 3, res.Metrics.ScoredTurns, "details: %+v", res.Sequences[0].Turns)

	b := trajs[1]
	tb := b.Turns[0]
	hb := render([]chat.Message{opd.HintMessage(hintFor["NameError: name 'x' is not defined"])}, false)
	want := append(append(append([]int32{}, b.Tokens[:tb.GenPromptStart]...), hb...), b.Tokens[tb.GenPromptStart:tb.End]...)
	require.Equal(t, want, teacher.reqs[0].Sequences[1].Tokens)
}

// With a rollout.Template as Renderer, TaskPrompt renders the enhanced context with the
// generation prompt, and the render ends with the student's generation prompt.
func TestDistillTaskPromptWithRolloutTemplate(t *testing.T) {
	tmpl, err := rollout.NewTemplate(toyPolicy{}, rollout.TemplateConfig{})
	require.NoError(t, err)
	var calls atomic.Int64
	teacher := &fakeTeacher{}
	d := newDistiller(t, opd.Config{Judge: scriptedJudge(&calls), Teacher: teacher.scorer(),
		Renderer: tmpl, Placement: opd.TaskPrompt, TopK: topK})
	res, err := d.Distill(context.Background(), group())
	require.NoError(t, err)
	require.Equal(t, 3, res.Metrics.ScoredTurns)
	require.Zero(t, res.Metrics.TemplateDrift)
	require.Len(t, teacher.reqs, 1)
	require.Len(t, teacher.reqs[0].Sequences, 3)
}
