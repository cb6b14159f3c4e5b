package imagestest

import (
	"encoding/json"
	"strings"
	"sync/atomic"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// ToyStudent is a scripted student for the vllmtest simulator (a test and demo
// backend, not a model) that plays the toy repository task "add" ([ToyTasks]'s
// first: toycalc.add returns a - b), as an agent with the default tools would: odd
// rollouts read the code, fix add with the patch tool and check it with the
// terminal; even ones break it another way with write_file, see their check fail,
// and stop. So a group of two or more has one resolved rollout and one that is not,
// and graded scores that differ. Its zero value is ready; it is safe for concurrent
// use. Pass its Turn to vllmtest.WithAgentScript.
type ToyStudent struct{ n atomic.Int64 }

// toyArithWrong is the even rollouts' toycalc/arith.py: add sums absolute values.
const toyArithWrong = `"""Arithmetic helpers."""


def add(a, b):
    """Return the sum of a and b."""
    return abs(a) + abs(b)


def sub(a, b):
    """Return a minus b."""
    return a - b


def mul(a, b):
    """Return the product of a and b."""
    return a * b


def clamp(x, lo, hi):
    """Return x limited to the closed range [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x
`

// Turn returns the assistant turn for in, or false for a conversation that is not
// about the toy task "add" (the simulator's model then samples freely).
func (s *ToyStudent) Turn(in vllmtest.ScriptInput) (string, bool) {
	if len(in.Messages) < 2 || !strings.Contains(in.Messages[1].Content, "toycalc.add(2, 3)") {
		return "", false
	}
	plan := ""
	for _, m := range in.Messages {
		if m.Role == chat.RoleAssistant && strings.HasPrefix(m.Content, "Plan: ") {
			plan = strings.TrimSuffix(strings.Fields(m.Content)[1], ".")
			break
		}
	}
	if plan == "" {
		plan = map[bool]string{true: "fix", false: "wrong"}[s.n.Add(1)%2 == 1]
	}
	switch {
	case in.Turn == 1:
		return "Plan: " + plan + ". Reading the code.\n" +
			call("terminal", map[string]any{"command": "git status --short && sed -n 1,12p toycalc/arith.py"}), true
	case in.Turn == 2 && plan == "fix":
		return call("patch", map[string]any{"path": "toycalc/arith.py",
			"old_string": "\"\"\"Return the sum of a and b.\"\"\"\n    return a - b",
			"new_string": "\"\"\"Return the sum of a and b.\"\"\"\n    return a + b"}), true
	case in.Turn == 2:
		return call("write_file", map[string]any{"path": "toycalc/arith.py", "content": toyArithWrong}), true
	case in.Turn == 3:
		return call("terminal", map[string]any{"command": `python3 -c "from toycalc import add; assert add(2, 3) == 5; assert add(-1, 1) == 0, add(-1, 1); print('ok')"`}), true
	default:
		return "Done.", true
	}
}

// call is a tool call as the simulator's Hermes template writes it.
func call(name string, args map[string]any) string {
	b, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}
