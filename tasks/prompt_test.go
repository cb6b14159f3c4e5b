package tasks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/tasks"
)

func TestUserPrompt(t *testing.T) {
	tests := []struct {
		name string
		task tasks.Task
		want string
	}{
		{
			name: "with tests",
			task: tasks.Task{Statement: "Write f().", TestCode: "from solution import f\nassert f() == 1\nprint('All tests passed!')\n"},
			want: "Solve the following coding task.\n\n" +
				"## Task\nWrite f().\n\n" +
				"## Tests\nThe following test code will be used to check your solution:\n" +
				"```python\nfrom solution import f\nassert f() == 1\nprint('All tests passed!')\n```\n\n" +
				"## Instructions\n" +
				"1. Write your solution to solution.py.\n" +
				"2. Write the test code above to test_solution.py.\n" +
				"3. Run python3 test_solution.py to check your solution.\n" +
				"4. Fix any failure and run the tests again until they all pass.\n",
		},
		{
			name: "tests without a final newline",
			task: tasks.Task{Statement: "S", TestCode: "assert True"},
			want: "Solve the following coding task.\n\n## Task\nS\n\n" +
				"## Tests\nThe following test code will be used to check your solution:\n" +
				"```python\nassert True\n```\n\n" +
				"## Instructions\n" +
				"1. Write your solution to solution.py.\n" +
				"2. Write the test code above to test_solution.py.\n" +
				"3. Run python3 test_solution.py to check your solution.\n" +
				"4. Fix any failure and run the tests again until they all pass.\n",
		},
		{
			name: "no tests",
			task: tasks.Task{Statement: "S"},
			want: "Solve the following coding task.\n\n## Task\nS\n\n" +
				"## Instructions\n" +
				"1. Write your solution to solution.py.\n" +
				"2. Write the test code above to test_solution.py.\n" +
				"3. Run python3 test_solution.py to check your solution.\n" +
				"4. Fix any failure and run the tests again until they all pass.\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tasks.UserPrompt(tc.task)); diff != "" {
				t.Errorf("UserPrompt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPromptMessages(t *testing.T) {
	task := tasks.Builtin()[0]
	custom := func(t tasks.Task) string { return "do " + t.ID }
	tests := []struct {
		name   string
		prompt tasks.Prompt
		want   []chat.Message
	}{
		{
			name: "defaults",
			want: []chat.Message{
				{Role: chat.RoleSystem, Content: tasks.DefaultSystemPrompt},
				{Role: chat.RoleUser, Content: tasks.UserPrompt(task)},
			},
		},
		{
			name:   "custom system and user",
			prompt: tasks.Prompt{System: "be brief", User: custom},
			want: []chat.Message{
				{Role: chat.RoleSystem, Content: "be brief"},
				{Role: chat.RoleUser, Content: "do fizzbuzz"},
			},
		},
		{
			name:   "no system",
			prompt: tasks.Prompt{NoSystem: true},
			want:   []chat.Message{{Role: chat.RoleUser, Content: tasks.UserPrompt(task)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.prompt.Messages(task)); diff != "" {
				t.Errorf("Messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSystemPrompt(t *testing.T) {
	// The five steps of the original, in order.
	steps := []string{"1. Write your solution to the file solution.py.", "2. Write the test code to the file test_solution.py.",
		"3. Run the tests with: python3 test_solution.py", "4. When a test fails", "5. When every test passes"}
	last := -1
	for _, s := range steps {
		i := strings.Index(tasks.DefaultSystemPrompt, s)
		require.Greater(t, i, last, "step %q missing or out of order", s)
		last = i
	}
}

func TestPromptNeverShowsReferenceSolution(t *testing.T) {
	for _, task := range tasks.Builtin() {
		for _, m := range (tasks.Prompt{}).Messages(task) {
			require.NotContains(t, m.Content, task.ReferenceSolution, "task %s", task.ID)
			require.NotContains(t, m.Content, task.HiddenTests, "task %s", task.ID)
		}
		require.Contains(t, tasks.UserPrompt(task), "Further tests, not shown here, will be run as well.")
		require.Contains(t, tasks.UserPrompt(task), "```python\n"+task.TestCode+"```\n")
	}
}
