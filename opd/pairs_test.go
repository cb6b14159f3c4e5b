package opd_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
)

func asst(content string, calls ...chat.ToolCall) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Content: content, ToolCalls: calls}
}

// The reference's long example: 2 + 30 × (1 + 3) = 122 messages give 30 pairs, each
// next state three cut parts joined with "\n---\n".
func TestPairsReferenceLongConversation(t *testing.T) {
	msgs := []chat.Message{system(strings.Repeat("s", 2000)), user(strings.Repeat("u", 3000))}
	calls := append(append(toolCall("terminal", `{"command":"ls"}`), toolCall("read_file", `{"path":"a"}`)...), toolCall("write_file", `{}`)...)
	for i := range 30 {
		msgs = append(msgs, asst(strings.Repeat(string(rune('a'+i%26)), 500), calls...))
		for j := range 3 {
			msgs = append(msgs, tool(strings.Repeat(string(rune('0'+j)), 6000)))
		}
	}
	require.Len(t, msgs, 122)

	pairs := opd.Pairs(msgs, 0)
	require.Len(t, pairs, 30)
	cut := func(c rune) string { return strings.Repeat(string(c), 4000) + "\n...[truncated]" }
	wantNext := cut('0') + "\n---\n" + cut('1') + "\n---\n" + cut('2')
	for i, p := range pairs {
		require.Equal(t, 2+4*i, p.Message)
		require.Equal(t, -1, p.TurnIndex)
		require.Equal(t, wantNext, p.NextState)
		require.Equal(t, chat.RoleTool, p.NextStateRole)
		require.Equal(t, msgs[p.Message], p.Assistant)
		require.Len(t, p.Context, p.Message, "context is every message before the turn")
	}
}

func TestPairs(t *testing.T) {
	call := toolCall("terminal", `{"command":"python test_solution.py"}`)
	tests := []struct {
		name string
		msgs []chat.Message
		max  int
		want []opd.Pair // Context is checked by length only
	}{
		{
			name: "reference worked example",
			msgs: []chat.Message{user("task"), asst("first"), tool("0123456789ABCDEF"), tool(""), tool("ok")},
			max:  10,
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "0123456789\n...[truncated]\n---\nok", NextStateRole: "tool"}}},
		},
		{
			name: "empty content and no tool calls: no pair, its tool results ignored",
			msgs: []chat.Message{user("task"), asst(""), tool("result")},
		},
		{
			name: "tool-call-only turn pairs (unlike the reference)",
			msgs: []chat.Message{user("task"), asst("", call...), tool(`{"exit_code": 1}`)},
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: `{"exit_code": 1}`, NextStateRole: "tool"}}},
		},
		{
			name: "whitespace-only user message: no pair",
			msgs: []chat.Message{user("task"), asst("done"), user(" \n\t ")},
		},
		{
			name: "tool results then a user message: one pair with role tool",
			msgs: []chat.Message{user("task"), asst("run", call...), tool("out"), user("try again"), asst("ok")},
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "out\n---\ntry again", NextStateRole: "tool"}}},
		},
		{
			name: "the run stops after one user message",
			msgs: []chat.Message{user("task"), asst("a"), user("u1"), user("u2")},
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "u1", NextStateRole: "user"}}},
		},
		{
			name: "assistant followed by assistant: no pair for the first",
			msgs: []chat.Message{user("task"), asst("a"), asst("b"), tool("out")},
			want: []opd.Pair{{Message: 2, Turn: judge.Turn{NextState: "out", NextStateRole: "tool"}}},
		},
		{
			name: "system message ends the run",
			msgs: []chat.Message{user("task"), asst("a"), system("note"), tool("out")},
		},
		{
			name: "trailing assistant: no pair",
			msgs: []chat.Message{user("task"), asst("a", call...), tool("out"), asst("all done")},
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "out", NextStateRole: "tool"}}},
		},
		{
			name: "cut in code points",
			msgs: []chat.Message{user("task"), asst("a"), tool("ééééé")},
			max:  3,
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "ééé\n...[truncated]", NextStateRole: "tool"}}},
		},
		{
			name: "only empty tool contents: no pair",
			msgs: []chat.Message{user("task"), asst("a"), tool(""), tool("")},
		},
		{
			name: "whitespace content is kept in the text",
			msgs: []chat.Message{user("task"), asst("a"), tool("  "), tool(" x ")},
			want: []opd.Pair{{Message: 1, Turn: judge.Turn{NextState: "  \n---\n x ", NextStateRole: "tool"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := opd.Pairs(tt.msgs, tt.max)
			for i := range tt.want {
				tt.want[i].TurnIndex = -1
				tt.want[i].Assistant = tt.msgs[tt.want[i].Message]
			}
			for i := range got {
				require.Len(t, got[i].Context, got[i].Message)
				got[i].Context = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Pairs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPairsContextIsReadOnlyPrefix(t *testing.T) {
	msgs := []chat.Message{user("task"), asst("a"), tool("out"), asst("b"), tool("out2")}
	pairs := opd.Pairs(msgs, 0)
	require.Len(t, pairs, 2)
	require.Equal(t, msgs[:3], pairs[1].Context)
	// Appending to a pair's context must not overwrite the conversation.
	_ = append(pairs[0].Context, user("injected"))
	require.Equal(t, "a", msgs[1].Content)
}

func TestTrajectoryPairs(t *testing.T) {
	traj := newTraj(system("sys"), user("task")).
		assistant(asst("", toolCall("write_file", `{"path":"solution.py"}`)...)).
		then(tool("written")).
		assistant(asst("running")).
		then(user("   ")).
		assistant(asst("again", toolCall("terminal", `{}`)...)).
		then(tool("ok")).
		assistant(asst("done")).
		build()
	// A message the trajectory recorded no turn for (say, injected by the caller).
	traj.Messages = append(traj.Messages, asst("extra"), tool("x"))

	pairs := opd.TrajectoryPairs(traj, 0)
	var got [][2]int
	for _, p := range pairs {
		got = append(got, [2]int{p.Message, p.TurnIndex})
	}
	want := [][2]int{{2, 0}, {6, 2}, {9, -1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(message, turn) (-want +got):\n%s", diff)
	}
}
