package tasks

import (
	"strings"

	"github.com/agentic-opd/agenticopd/chat"
)

// DefaultSystemPrompt is the system prompt of [Prompt] when none is set: the role of a
// skilled Python programmer and five steps (write solution.py, write the tests to
// test_solution.py, run them, fix failures, report success), as in the original
// environment, in this library's own words and with python3 as the interpreter.
const DefaultSystemPrompt = `You are an experienced Python programmer. You solve coding tasks with the tools you are given:
1. Write your solution to the file solution.py.
2. Write the test code to the file test_solution.py.
3. Run the tests with: python3 test_solution.py
4. When a test fails, read the error, correct the code and run the tests again.
5. When every test passes, say that the task is done.

Work efficiently: use few steps, and fix errors one at a time, methodically.`

// Prompt builds the messages that start a rollout. The zero value uses
// [DefaultSystemPrompt] and [UserPrompt].
type Prompt struct {
	// System is the system prompt; "" means DefaultSystemPrompt.
	System string
	// NoSystem leaves the system message out.
	NoSystem bool
	// User renders a task as the user message; nil means UserPrompt.
	User func(Task) string
}

// Messages returns the initial conversation for t: the system message (unless
// NoSystem) and the user message. For a repository task ([Task.Repo]) the defaults
// are [RepoSystemPrompt] and [RepoUserPrompt].
func (p Prompt) Messages(t Task) []chat.Message {
	user := p.User
	if user == nil {
		user = UserPrompt
		if t.Repo != nil {
			user = RepoUserPrompt
		}
	}
	msgs := make([]chat.Message, 0, 2)
	if !p.NoSystem {
		sys := p.System
		if sys == "" {
			sys = DefaultSystemPrompt
			if t.Repo != nil {
				sys = RepoSystemPrompt
			}
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: sys})
	}
	return append(msgs, chat.Message{Role: chat.RoleUser, Content: user(t)})
}

// UserPrompt renders t with the original environment's sections, in this library's own
// words (the original says "used to verify your solution" and "python", this says
// "used to check your solution" and "python3"):
//
//	Solve the following coding task.
//
//	## Task
//	<statement>
//
//	## Tests
//	The following test code will be used to check your solution:
//	```python
//	<test code, verbatim>
//	```
//
//	## Instructions
//	1. … 4.
//
// When t has hidden tests or input/output cases, the Tests section ends with a line
// saying that further tests will be run; the hidden tests themselves and the cases are
// never shown. The Tests section is left out when t has no test code. The test code is copied
// verbatim; a newline is added before the closing fence when it does not end with one.
// The prompt ends with a newline.
func UserPrompt(t Task) string {
	var b strings.Builder
	b.WriteString("Solve the following coding task.\n\n")
	b.WriteString("## Task\n")
	b.WriteString(t.Statement)
	b.WriteString("\n\n")
	if t.TestCode != "" {
		b.WriteString("## Tests\n")
		b.WriteString("The following test code will be used to check your solution:\n")
		b.WriteString("```python\n")
		b.WriteString(t.TestCode)
		if !strings.HasSuffix(t.TestCode, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("```\n")
		if t.HiddenTests != "" || len(t.Cases) > 0 {
			b.WriteString("Further tests, not shown here, will be run as well.\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("## Instructions\n")
	b.WriteString("1. Write your solution to solution.py.\n")
	b.WriteString("2. Write the test code above to test_solution.py.\n")
	b.WriteString("3. Run python3 test_solution.py to check your solution.\n")
	b.WriteString("4. Fix any failure and run the tests again until they all pass.\n")
	return b.String()
}
