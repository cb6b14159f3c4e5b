package rollout_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
)

func TestHermesParse(t *testing.T) {
	type call struct {
		Name, Args string
		Invalid    bool
	}
	tests := []struct {
		name          string
		text          string
		wantContent   string
		wantReasoning string
		wantCalls     []call
	}{
		{
			name:        "plain answer with end token",
			text:        "All tests pass.<|im_end|>",
			wantContent: "All tests pass.",
		},
		{
			name:        "one call, object arguments",
			text:        "I'll write it.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.py\", \"content\": \"x = 1\\n\"}}\n</tool_call><|im_end|>",
			wantContent: "I'll write it.",
			wantCalls:   []call{{Name: "write_file", Args: `{"path":"a.py","content":"x = 1\n"}`}},
		},
		{
			name: "several calls, string arguments",
			text: "<tool_call>{\"name\": \"terminal\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}</tool_call>\n" +
				"<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}</tool_call>",
			wantCalls: []call{
				{Name: "terminal", Args: `{"command":"ls"}`},
				{Name: "read_file", Args: `{"path":"b"}`},
			},
		},
		{
			name:      "missing and empty-string arguments become {}",
			text:      `<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b", "arguments": ""}</tool_call>`,
			wantCalls: []call{{Name: "a", Args: `{}`}, {Name: "b", Args: `{}`}},
		},
		{
			name:      "invalid JSON keeps going",
			text:      `<tool_call>{"name": "terminal", "arguments": {"command": "ls"</tool_call><tool_call>{"name": "x"}</tool_call>`,
			wantCalls: []call{{Name: "", Invalid: true}, {Name: "x", Args: `{}`}},
		},
		{
			name:      "unclosed block is invalid and ends parsing",
			text:      "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"comm",
			wantCalls: []call{{Invalid: true}},
		},
		{
			name:      "arguments that are not an object",
			text:      `<tool_call>{"name": "t", "arguments": [1]}</tool_call>`,
			wantCalls: []call{{Name: "t", Invalid: true}},
		},
		{
			name:      "missing name",
			text:      `<tool_call>{"arguments": {}}</tool_call>`,
			wantCalls: []call{{Invalid: true}},
		},
		{
			name:      "text after the object",
			text:      `<tool_call>{"name": "t"} extra</tool_call>`,
			wantCalls: []call{{Invalid: true}},
		},
		{
			name:          "reasoning is split off and its tags ignored",
			text:          "<think>\nmaybe <tool_call>{\"name\": \"no\"}</tool_call>\n</think>\n\nOK.\n<tool_call>{\"name\": \"yes\", \"arguments\": {}}</tool_call><|im_end|>",
			wantContent:   "OK.",
			wantReasoning: "maybe <tool_call>{\"name\": \"no\"}</tool_call>",
			wantCalls:     []call{{Name: "yes", Args: `{}`}},
		},
		{
			name:          "reasoning opened by the generation prompt",
			text:          "plan\n</think>\n\nAnswer.",
			wantContent:   "Answer.",
			wantReasoning: "plan",
		},
		{
			name:      "</think> inside a call's arguments is not reasoning",
			text:      `<tool_call>{"name": "write_file", "arguments": {"content": "</think>"}}</tool_call>`,
			wantCalls: []call{{Name: "write_file", Args: `{"content":"</think>"}`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Hermes{}.Parse(tc.text)
			require.Equal(t, tc.wantContent, got.Content)
			require.Equal(t, tc.wantReasoning, got.Reasoning)
			var calls []call
			for _, c := range got.Calls {
				if c.Err != nil {
					require.ErrorIs(t, c.Err, rollout.ErrInvalidToolCall)
				}
				calls = append(calls, call{Name: c.Name, Args: string(c.Arguments), Invalid: c.Err != nil})
			}
			if diff := cmp.Diff(tc.wantCalls, calls, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzHermesParse(f *testing.F) {
	for _, s := range []string{
		"hello<|im_end|>",
		`<tool_call>{"name": "t", "arguments": {"a": 1}}</tool_call>`,
		`<tool_call>{"name": "t", "arguments": "{\"a\": 1}"}</tool_call><tool_call>`,
		"<think>x</think><tool_call>{}</tool_call>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := rollout.Hermes{}.Parse(text)
		for _, c := range got.Calls {
			if c.Err != nil {
				continue
			}
			if c.Name == "" {
				t.Fatalf("valid call without a name in %q", text)
			}
			var obj map[string]any
			if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
				t.Fatalf("valid call with non-object arguments %q", c.Arguments)
			}
		}
		if utf8.ValidString(text) && !utf8.ValidString(got.Content) {
			t.Fatalf("content became invalid UTF-8")
		}
	})
}
