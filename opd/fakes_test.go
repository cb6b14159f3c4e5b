package opd_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A ChatML-like template over a toy vocabulary: every character is one token
// (rune+1000), and a message renders as
//
//	<|im_start|> ROLE \n CONTENT <|im_end|> \n
const (
	imStart int32 = 1
	imEnd   int32 = 6
	newline int32 = 7
)

var roleID = map[string]int32{chat.RoleUser: 2, chat.RoleAssistant: 3, chat.RoleTool: 4, chat.RoleSystem: 5}

func textIDs(s string) []int32 {
	var ids []int32
	for _, r := range s {
		ids = append(ids, r+1000)
	}
	return ids
}

// genPrompt is the template's generation prompt.
var genPrompt = []int32{imStart, roleID[chat.RoleAssistant], newline}

func renderMsg(m chat.Message) []int32 {
	ids := []int32{imStart, roleID[m.Role], newline}
	ids = append(ids, textIDs(m.Content)...)
	return append(ids, imEnd, newline)
}

func render(msgs []chat.Message, gen bool) []int32 {
	var ids []int32
	for _, m := range msgs {
		ids = append(ids, renderMsg(m)...)
	}
	if gen {
		ids = append(ids, genPrompt...)
	}
	return ids
}

// fakeTemplate implements opd.Templater and opd.Renderer and counts its calls.
type fakeTemplate struct {
	mu      sync.Mutex
	deltas  [][]chat.Message
	renders [][]chat.Message
	fail    error // returned by Delta and Render when set
}

func (f *fakeTemplate) Delta(ctx context.Context, msgs []chat.Message, gen bool) ([]int32, error) {
	f.mu.Lock()
	f.deltas = append(f.deltas, chat.Clone(msgs))
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return render(msgs, gen), ctx.Err()
}

func (f *fakeTemplate) Render(ctx context.Context, msgs []chat.Message, gen bool) (rollout.Rendered, error) {
	f.mu.Lock()
	f.renders = append(f.renders, chat.Clone(msgs))
	f.mu.Unlock()
	if f.fail != nil {
		return rollout.Rendered{}, f.fail
	}
	return rollout.Rendered{Tokens: render(msgs, gen)}, ctx.Err()
}

// trajBuilder records a conversation the way the agent loop does: prompt, then per
// turn the generation prompt, the sampled ids (text, tool-call text, <|im_end|>), the
// separator, and the delta of the messages that follow.
type trajBuilder struct{ t *rollout.Trajectory }

func newTraj(msgs ...chat.Message) *trajBuilder {
	b := &trajBuilder{t: &rollout.Trajectory{}}
	b.t.Messages = append(b.t.Messages, msgs...)
	b.add(rollout.SegPrompt, render(msgs, false), -1)
	return b
}

func (b *trajBuilder) add(kind rollout.SegmentKind, ids []int32, msg int) (start, end int) {
	start = len(b.t.Tokens)
	b.t.Tokens = append(b.t.Tokens, ids...)
	for range ids {
		lp := float32(0)
		if kind == rollout.SegSampled {
			lp = -0.125
		}
		b.t.Logprobs = append(b.t.Logprobs, lp)
	}
	end = len(b.t.Tokens)
	b.t.Segments = append(b.t.Segments, rollout.Segment{Kind: kind, Start: start, End: end, Message: msg})
	return start, end
}

// sampledIDs is what the model generated for m.
func sampledIDs(m chat.Message) []int32 {
	ids := textIDs(m.Content)
	for _, c := range m.ToolCalls {
		ids = append(ids, textIDs("<tool_call>"+c.Function.Name+c.Function.Arguments+"</tool_call>")...)
	}
	return append(ids, imEnd)
}

// assistant records a generated assistant turn.
func (b *trajBuilder) assistant(m chat.Message) *trajBuilder {
	m.Role = chat.RoleAssistant
	idx := len(b.t.Messages)
	b.t.Messages = append(b.t.Messages, m)
	gp, _ := b.add(rollout.SegGenPrompt, genPrompt, idx)
	start, end := b.add(rollout.SegSampled, sampledIDs(m), idx)
	b.add(rollout.SegSeparator, []int32{newline}, idx)
	b.t.Turns = append(b.t.Turns, rollout.Turn{Message: idx, GenPromptStart: gp, Start: start, End: end})
	b.t.TurnsUsed++
	return b
}

// then records messages appended after a turn (tool results, a user message).
func (b *trajBuilder) then(msgs ...chat.Message) *trajBuilder {
	idx := len(b.t.Messages)
	b.t.Messages = append(b.t.Messages, msgs...)
	b.add(rollout.SegDelta, render(msgs, false), idx)
	return b
}

func (b *trajBuilder) build() *rollout.Trajectory { return b.t }

func toolCall(name, args string) []chat.ToolCall {
	return []chat.ToolCall{{ID: "call_" + name, Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}}}
}

func tool(content string) chat.Message { return chat.Message{Role: chat.RoleTool, Content: content} }
func user(content string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: content} }
func system(content string) chat.Message {
	return chat.Message{Role: chat.RoleSystem, Content: content}
}

// Teacher rows of the fake scorer, a function of the teacher sequence and position so
// that a row placed at the wrong student position, or computed from the wrong
// sequence, is caught: entry 0 is the token at p, entry 1 the token before it, entry 2
// the teacher position itself, the rest fillers.
func teacherRow(seq []int32, p, k int) ([]int32, []float32, float32) {
	ids := make([]int32, k)
	lps := make([]float32, k)
	for i := range k {
		switch i {
		case 0:
			ids[i] = seq[p]
		case 1:
			ids[i] = seq[p-1]
		case 2:
			ids[i] = int32(p)
		default:
			ids[i] = int32(50000 + i)
		}
		lps[i] = -0.5 - float32(i)
	}
	return ids, lps, -0.25 - float32(p)/1000
}

// fakeTeacher is a scorer that answers with teacherRow and records its requests.
type fakeTeacher struct {
	mu   sync.Mutex
	reqs []scorer.Request
	err  error
}

func (f *fakeTeacher) scorer() scorer.Func {
	return func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		if err := req.Validate(); err != nil {
			return scorer.Result{}, err
		}
		if f.err != nil {
			return scorer.Result{}, f.err
		}
		if err := ctx.Err(); err != nil {
			return scorer.Result{}, err
		}
		var res scorer.Result
		for _, s := range req.Sequences {
			r := scorer.SequenceResult{Positions: s.Positions, Offsets: []int32{0}}
			for _, p := range s.Positions {
				ids, lps, tok := teacherRow(s.Tokens, p, req.K)
				r.TopIDs = append(r.TopIDs, ids...)
				r.TopLogprobs = append(r.TopLogprobs, lps...)
				r.Offsets = append(r.Offsets, int32(len(r.TopIDs)))
				r.TokenLogprobs = append(r.TokenLogprobs, tok)
			}
			res.Sequences = append(res.Sequences, r)
		}
		return res, nil
	}
}

var errBoom = errors.New("boom")
