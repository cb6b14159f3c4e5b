package opd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
)

// Placement says where a hint goes in the teacher's input.
type Placement int

const (
	// Inline (the default) inserts each hint as a user message right before the
	// generation prompt of the turn it is for. Its tokens come from the [Templater], so
	// every student id stays in place and the teacher positions of a turn are its
	// student positions shifted by the lengths of the hints inserted before it. All
	// hinted turns of a rollout are scored in one teacher sequence; a hint is seen by
	// its own turn and by later turns, never by earlier ones.
	Inline Placement = iota
	// TaskPrompt is the reference's placement, for comparison: the hint is appended to
	// the last user message before the turn ([AppendHint]), the enhanced context is
	// rendered with the generation prompt by the [Renderer], and the student's own ids
	// of the turn follow. One teacher sequence per hinted turn.
	TaskPrompt
)

// String returns "inline" or "task_prompt".
func (p Placement) String() string {
	switch p {
	case Inline:
		return "inline"
	case TaskPrompt:
		return "task_prompt"
	default:
		return fmt.Sprintf("Placement(%d)", int(p))
	}
}

// Templater gives the template tokens for appending messages to a conversation whose
// last turn is closed: for a hint before an assistant turn, the [Distiller] calls
// Delta(ctx, []chat.Message{HintMessage(hint)}, false) and inserts the result right
// before the turn's generation prompt. [rollout.Template] implements it.
//
// An error matching [rollout.ErrTemplateDrift] or [rollout.ErrRoleUnsupported] leaves
// that turn unscored and is counted; any other error fails the call to Distill.
// Implementations must be safe for concurrent use.
type Templater interface {
	// Delta returns the template tokens that append msgs.
	Delta(ctx context.Context, msgs []chat.Message, addGenerationPrompt bool) ([]int32, error)
}

// Renderer renders a whole conversation with the server's chat template (and the
// tools the student saw). [rollout.Template] implements it. Implementations must be
// safe for concurrent use.
type Renderer interface {
	// Render renders msgs as one conversation.
	Render(ctx context.Context, msgs []chat.Message, addGenerationPrompt bool) (rollout.Rendered, error)
}

// HintMarker introduces a hint in the teacher's input, in both placements.
const HintMarker = "[user's hint / instruction]"

// HintMessage is the user message an Inline hint becomes: [HintMarker], a newline and
// the hint.
func HintMessage(hint string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Content: HintMarker + "\n" + hint}
}

// AppendHint returns a copy of context with hint added as the reference adds it:
//
//   - an empty context becomes one user message, [HintMarker] + "\n" + hint, with the
//     hint as given (not stripped);
//   - otherwise the target is the last user message, or the last message when there is
//     none (for example a lone system message); its content becomes
//     strip(content + "\n\n" + HintMarker + "\n" + strip(hint)), where strip removes
//     surrounding white space as [judge.Strip] does.
//
// context itself is not modified.
func AppendHint(context []chat.Message, hint string) []chat.Message {
	if len(context) == 0 {
		return []chat.Message{HintMessage(hint)}
	}
	out := chat.Clone(context)
	target := len(out) - 1
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Role == chat.RoleUser {
			target = i
			break
		}
	}
	out[target].Content = judge.Strip(out[target].Content + "\n\n" + HintMarker + "\n" + judge.Strip(hint))
	return out
}

// renderable returns the first n messages of t as a server's chat template can render
// them. The agent keeps a tool call it could not parse in the conversation, with the
// text between its tags as arguments ([rollout.Turn.InvalidCalls]); a server refuses
// to render arguments that are not JSON (vLLM parses them before the template runs),
// and one that happens to be a JSON object would render as a call the model never
// made. Such a call, and any call whose arguments are not a JSON object (a trajectory
// built by other means), is taken out of ToolCalls and written into the message's
// content as the model wrote it, in the Hermes tags the agent's default parser reads.
// The tool message answering it stays. t.Messages itself is not modified.
func renderable(t *rollout.Trajectory, n int) []chat.Message {
	msgs := t.Messages[:n]
	invalid := map[int][]int{} // message -> invalid call indices
	for _, turn := range t.Turns {
		if turn.Message < n && len(turn.InvalidCalls) > 0 {
			invalid[turn.Message] = turn.InvalidCalls
		}
	}
	var out []chat.Message
	for i, m := range msgs {
		if m.Role != chat.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		text := func(k int) bool {
			return slices.Contains(invalid[i], k) || !argumentsRenderable(m.ToolCalls[k].Function.Arguments)
		}
		var b strings.Builder
		var kept []chat.ToolCall
		for k, tc := range m.ToolCalls {
			if !text(k) {
				kept = append(kept, tc)
				continue
			}
			if b.Len() == 0 {
				b.WriteString(m.Content)
			}
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString("<tool_call>" + tc.Function.Arguments + "</tool_call>")
		}
		if len(kept) == len(m.ToolCalls) {
			continue
		}
		if out == nil {
			out = chat.Clone(msgs)
		}
		out[i].Content, out[i].ToolCalls = b.String(), kept
	}
	if out == nil {
		return msgs
	}
	return out
}

// argumentsRenderable reports whether args is what a server renders as a call's
// arguments: empty, a JSON object, or a JSON string holding one (or nothing).
func argumentsRenderable(args string) bool {
	s := strings.TrimSpace(args)
	if s == "" {
		return true
	}
	if s[0] == '"' {
		var inner string
		if json.Unmarshal([]byte(s), &inner) != nil {
			return false
		}
		if s = strings.TrimSpace(inner); s == "" {
			return true
		}
	}
	var obj map[string]json.RawMessage
	return s[0] == '{' && json.Unmarshal([]byte(s), &obj) == nil
}
