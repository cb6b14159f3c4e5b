package opd

import (
	"bytes"
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
	// of the turn follow. One teacher sequence per hinted turn. An earlier assistant
	// turn with a tool call the agent could not parse ([rollout.Turn.InvalidCalls]) is
	// rendered whole as text, its calls in the order the model wrote them.
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
// made. An assistant message with such a call, or with any call whose arguments are
// not a JSON object (a trajectory built by other means), is therefore written whole
// as text, in the order the model wrote it: its content, then every call in the
// Hermes tags the agent's default parser reads, joined by "\n" as Qwen-style
// templates join them. The template renders content before calls, so keeping the
// readable calls structured would move them in front of the unreadable ones, and the
// tool messages that answer them would follow in the other order.
//
// An unparsable call is written as the text between its tags, as the model wrote it.
// A readable call is written as the template writes a call,
// "<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>", with ARGS as the
// message holds them (a JSON string holding an object unwrapped) spaced as
// Python's json.dumps spaces them; a call whose arguments are not JSON at all keeps
// them verbatim there. The tool messages stay. t.Messages itself is not modified.
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
		asText := false
		for k, tc := range m.ToolCalls {
			if _, ok := templateArguments(tc.Function.Arguments); !ok || slices.Contains(invalid[i], k) {
				asText = true
				break
			}
		}
		if !asText {
			continue
		}
		if out == nil {
			out = chat.Clone(msgs)
		}
		out[i].Content, out[i].ToolCalls = turnText(m, invalid[i]), nil
	}
	if out == nil {
		return msgs
	}
	return out
}

// turnText writes an assistant message's content and tool calls as one text, in
// order; invalid holds the indices of the calls the parser could not read.
func turnText(m chat.Message, invalid []int) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for k, tc := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		args, ok := templateArguments(tc.Function.Arguments)
		if slices.Contains(invalid, k) {
			b.WriteString("<tool_call>" + tc.Function.Arguments + "</tool_call>")
			continue
		}
		if !ok {
			args = tc.Function.Arguments
		}
		b.WriteString("<tool_call>\n{\"name\": " + jsonString(tc.Function.Name) + ", \"arguments\": " + args + "}\n</tool_call>")
	}
	return b.String()
}

// templateArguments returns args as a chat template writes a call's arguments, and
// whether a server renders them: empty (written {}), a JSON object, or a JSON string
// holding one (or nothing). The object keeps its members, numbers and string escapes
// as given, with the separators ", " and ": " of Python's json.dumps.
func templateArguments(args string) (string, bool) {
	s := strings.TrimSpace(args)
	if s == "" {
		return "{}", true
	}
	if s[0] == '"' {
		var inner string
		if json.Unmarshal([]byte(s), &inner) != nil {
			return "", false
		}
		if s = strings.TrimSpace(inner); s == "" {
			return "{}", true
		}
	}
	var obj map[string]json.RawMessage
	if s[0] != '{' || json.Unmarshal([]byte(s), &obj) != nil {
		return "", false
	}
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(s)) != nil {
		return "", false
	}
	return pySpaced(compact.Bytes()), true
}

// pySpaced adds a space after every ',' and ':' outside strings of compact JSON.
func pySpaced(compact []byte) string {
	var b strings.Builder
	inString, escaped := false, false
	for _, c := range compact {
		b.WriteByte(c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// jsonString is s as a JSON string, with <, > and & as they are.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
