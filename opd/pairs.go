package opd

import (
	"strings"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
)

// DefaultHintMaxNextStateChars is the default cut, in code points, of each next-state
// message shown to the judge.
const DefaultHintMaxNextStateChars = 4000

// nextStateSeparator joins the next-state messages of a pair.
const nextStateSeparator = "\n---\n"

// Pair is an assistant turn and the state that followed it: what a judge is asked
// about.
type Pair struct {
	// Turn is the judge's input: the context before the assistant message, the message
	// itself, and the next state with its role. Context shares memory with the
	// conversation it came from; treat it as read-only.
	judge.Turn
	// Message is the index of the assistant message in the conversation.
	Message int
	// TurnIndex is the index in [rollout.Trajectory.Turns] of the turn that generated
	// the message, or -1 when it is unknown (pairs made from bare messages, or a message
	// the trajectory recorded no turn for).
	TurnIndex int
}

// Pairs finds the turn pairs of a conversation as the reference does, except that an
// assistant message with tool calls but no text counts too:
//
//   - an assistant message with text or tool calls opens a pair; its context is every
//     message before it;
//   - its next state is the run of tool messages right after it, optionally ended by
//     one user message; any other message ends the run, so an assistant message
//     followed by another assistant message, or by nothing, has no pair;
//   - each next-state message with content is cut to maxNextStateChars code points
//     (with "\n...[truncated]" appended, see [judge.Truncate]), and the parts are
//     joined with "\n---\n";
//   - the next state's role is the role of its first message;
//   - a next state that is only white space gives no pair.
//
// maxNextStateChars ≤ 0 means [DefaultHintMaxNextStateChars]. TurnIndex is -1 in
// every pair; see [TrajectoryPairs].
func Pairs(msgs []chat.Message, maxNextStateChars int) []Pair {
	if maxNextStateChars <= 0 {
		maxNextStateChars = DefaultHintMaxNextStateChars
	}
	var pairs []Pair
	for i, m := range msgs {
		if m.Role != chat.RoleAssistant || (m.Content == "" && len(m.ToolCalls) == 0) {
			continue
		}
		role, next, ok := nextState(msgs[i+1:], maxNextStateChars)
		if !ok {
			continue
		}
		pairs = append(pairs, Pair{
			Turn: judge.Turn{
				Context:       msgs[:i:i],
				Assistant:     m,
				NextState:     next,
				NextStateRole: role,
			},
			Message:   i,
			TurnIndex: -1,
		})
	}
	return pairs
}

// nextState collects the tool messages at the start of rest, and one user message
// after them, and returns the role of the first and their joined, cut contents.
func nextState(rest []chat.Message, max int) (role, text string, ok bool) {
	var parts []string
	for j, m := range rest {
		if m.Role != chat.RoleTool && m.Role != chat.RoleUser {
			break
		}
		if j == 0 {
			role = m.Role
		}
		if m.Content != "" {
			parts = append(parts, judge.Truncate(m.Content, max))
		}
		if m.Role == chat.RoleUser {
			break
		}
	}
	text = strings.Join(parts, nextStateSeparator)
	if role == "" || judge.Strip(text) == "" {
		return "", "", false
	}
	return role, text, true
}

// TrajectoryPairs returns the [Pairs] of traj.Messages with TurnIndex set: the index of
// the turn in traj.Turns whose Message is the pair's assistant message, or -1.
func TrajectoryPairs(traj *rollout.Trajectory, maxNextStateChars int) []Pair {
	pairs := Pairs(traj.Messages, maxNextStateChars)
	if len(pairs) == 0 {
		return nil
	}
	turnOf := make(map[int]int, len(traj.Turns))
	for k, t := range traj.Turns {
		if _, dup := turnOf[t.Message]; !dup {
			turnOf[t.Message] = k
		}
	}
	for i := range pairs {
		if k, ok := turnOf[pairs[i].Message]; ok {
			pairs[i].TurnIndex = k
		}
	}
	return pairs
}
