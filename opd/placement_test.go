package opd_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
)

// The reference's hint-injection examples (§10.4). Its fourth example, list content
// [{"text":"a"},"b"], has no counterpart: chat.Message content is a string.
func TestAppendHint(t *testing.T) {
	tests := []struct {
		name    string
		context []chat.Message
		hint    string
		want    []chat.Message
	}{
		{
			name: "empty context: one user message, hint not stripped",
			hint: "  h  ",
			want: []chat.Message{user("[user's hint / instruction]\n  h  ")},
		},
		{
			name:    "no user message: appended to the last message",
			context: []chat.Message{system("S")},
			hint:    "h",
			want:    []chat.Message{system("S\n\n[user's hint / instruction]\nh")},
		},
		{
			name:    "stripping",
			context: []chat.Message{user("  U  ")},
			hint:    "  h  ",
			want:    []chat.Message{user("U  \n\n[user's hint / instruction]\nh")},
		},
		{
			name:    "the last user message, not the last message",
			context: []chat.Message{system("S"), user("task"), asst("a"), tool("out"), user("second"), asst("b"), tool("out2")},
			hint:    "use sorted()",
			want: []chat.Message{system("S"), user("task"), asst("a"), tool("out"),
				user("second\n\n[user's hint / instruction]\nuse sorted()"), asst("b"), tool("out2")},
		},
		{
			name:    "agentic rollout: the task prompt gets the hint",
			context: []chat.Message{system("S"), user("task\n"), asst("", toolCall("terminal", "{}")...), tool("out")},
			hint:    "check the exit code",
			want: []chat.Message{system("S"), user("task\n\n\n[user's hint / instruction]\ncheck the exit code"),
				asst("", toolCall("terminal", "{}")...), tool("out")},
		},
		{
			name:    "no user message, several messages",
			context: []chat.Message{system("S"), asst("a"), tool(" out \n")},
			hint:    "h",
			want:    []chat.Message{system("S"), asst("a"), tool("out \n\n\n[user's hint / instruction]\nh")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := chat.Clone(tt.context)
			got := opd.AppendHint(tt.context, tt.hint)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AppendHint (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.context); diff != "" {
				t.Errorf("AppendHint modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestHintMessage(t *testing.T) {
	want := chat.Message{Role: "user", Content: "[user's hint / instruction]\nRun the tests first."}
	if diff := cmp.Diff(want, opd.HintMessage("Run the tests first.")); diff != "" {
		t.Errorf("HintMessage (-want +got):\n%s", diff)
	}
}

func TestPlacementString(t *testing.T) {
	for p, want := range map[opd.Placement]string{opd.Inline: "inline", opd.TaskPrompt: "task_prompt", 7: "Placement(7)"} {
		if got := p.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(p), got, want)
		}
	}
}
