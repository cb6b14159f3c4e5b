// Package scripted plays a coding agent and a judge on the vllmtest simulator, for the
// example programs: a demo backend, not a model.
package scripted

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// The scripted student plays one of four plans per rollout, in turn, so that a group
// has different scores and every stage of the pipeline has real work:
//
//	direct:  write the solution and the tests, run them, report success
//	fix:     write a wrong solution, run the tests, see them fail, fix it, run again
//	give-up: write a wrong solution, run the tests, see them fail, stop
//	no-run:  write the solution and stop without running anything
//
// The plan is named in the first assistant message, so later turns read it back from
// the conversation the simulator parses out of the prompt. A rollout whose requests
// carry a seed plays the plan its seed picks; others take the plans in turn.
var plans = []string{"direct", "fix", "give-up", "no-run"}

var planRE = regexp.MustCompile(`Plan: ([a-z-]+)\.`)

// Student is the scripted agent; its zero value plays the built-in tasks. It is safe
// for concurrent use.
type Student struct {
	// Tasks are the tasks it recognises in the user prompt; nil means tasks.Builtin().
	Tasks []tasks.Task
	mu    sync.Mutex
	next  int
}

// Turn returns the text of the assistant turn the simulator should generate; pass it
// to vllmtest.WithAgentScript.
func (s *Student) Turn(in vllmtest.ScriptInput) (string, bool) {
	task, ok := s.task(in.Messages)
	if !ok {
		return "", false // not one of ours: let the simulator's model sample freely
	}
	plan := ""
	for _, m := range in.Messages {
		if m.Role == chat.RoleAssistant {
			if sm := planRE.FindStringSubmatch(m.Content); sm != nil {
				plan = sm[1]
				break
			}
		}
	}
	switch {
	case plan != "":
	case in.Seed != nil:
		// A seeded rollout (Config.SeedSampling: the rollouts of a group have
		// consecutive seeds) plays the plan its seed picks, whatever order the
		// rollouts' requests arrive in: the same seeds, the same rollouts.
		plan = plans[uint64(*in.Seed)%uint64(len(plans))]
	default:
		s.mu.Lock()
		plan = plans[s.next%len(plans)]
		s.next++
		s.mu.Unlock()
	}
	wrong := wrongSolution(task.ReferenceSolution)
	switch step := in.Turn; {
	case step == 1:
		first := task.ReferenceSolution
		if plan == "fix" || plan == "give-up" {
			first = wrong
		}
		text := fmt.Sprintf("Plan: %s. I will write the solution and the tests first.\n", plan) +
			call("write_file", map[string]any{"path": "solution.py", "content": first})
		if plan != "no-run" {
			text += "\n" + call("write_file", map[string]any{"path": "test_solution.py", "content": task.TestCode})
		}
		return text, true
	case plan == "no-run":
		return "The solution is written.", true
	case step == 2:
		return "Now I run the tests.\n" + call("terminal", map[string]any{"command": "python test_solution.py"}), true
	case plan == "direct" && step == 3:
		return "All tests passed.", true
	case plan == "give-up" && step == 3:
		return "The tests fail and I could not find the bug.", true
	case plan == "fix" && step == 3:
		return "The tests failed: the functions return None. I rewrite solution.py.\n" +
			call("write_file", map[string]any{"path": "solution.py", "content": task.ReferenceSolution}), true
	case plan == "fix" && step == 4:
		return call("terminal", map[string]any{"command": "python test_solution.py"}), true
	default:
		return "All tests passed now.", true
	}
}

// task finds the built-in task whose statement is in the user message.
func (s *Student) task(msgs []chat.Message) (tasks.Task, bool) {
	ts := s.Tasks
	if ts == nil {
		ts = tasks.Builtin()
	}
	for _, m := range msgs {
		if m.Role != chat.RoleUser {
			continue
		}
		for _, t := range ts {
			if strings.Contains(m.Content, t.Statement) {
				return t, true
			}
		}
	}
	return tasks.Task{}, false
}

func call(name string, args map[string]any) string {
	b, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

var defRE = regexp.MustCompile(`(?m)^def (\w+)\(`)

// wrongSolution defines the reference solution's functions with bodies that return
// None, so the canonical tests fail with an AssertionError.
func wrongSolution(reference string) string {
	var b strings.Builder
	for _, m := range defRE.FindAllStringSubmatch(reference, -1) {
		fmt.Fprintf(&b, "def %s(*args, **kwargs):\n    return None\n\n", m[1])
	}
	return b.String()
}

// Judge plays the judge (pass it to vllmtest.WithChatScript): a failing test run in
// the next state is hindsight the turn could have used; anything else is not. Of three votes, two agree, so the
// default Majority selection has a real majority to find.
func Judge(in vllmtest.ChatScriptInput) []string {
	user := ""
	for _, m := range in.Messages {
		if m.Role == chat.RoleUser {
			user = m.Content
		}
	}
	next := user
	if i := strings.Index(user, "## Next state"); i >= 0 {
		next = user[i:]
	}
	failed := strings.Contains(next, "AssertionError") || strings.Contains(next, "Traceback")
	hint := "Implement the real algorithm in solution.py before running the tests; a stub that returns None fails every assertion."
	if strings.Contains(user, "toycalc") { // the toy repository task
		hint = "The check of add failed: make toycalc/arith.py's add return the plain sum a + b, with no other change, then run the check again."
	}
	out := make([]string, max(in.N, 1))
	for i := range out {
		switch {
		case failed && i != 2:
			out[i] = "The tests failed: the code does not do what they check.\n\\boxed{1}\n[HINT_START]" + hint + "[HINT_END]"
		case failed:
			out[i] = "The action itself was reasonable.\n\\boxed{-1}"
		default:
			out[i] = "The next state confirms the action worked.\n\\boxed{-1}"
		}
	}
	return out
}

// Start starts the vllmtest simulator with a Student and the Judge, allowing topK
// prompt logprobs (like vLLM's --max-logprobs). The caller closes it. The toy
// repository task "add" is played by imagestest.ToyStudent; other tasks the Student
// does not know get the simulator's free sampling.
func Start(topK int) (*vllmtest.Server, error) {
	student, toy := &Student{}, &imagestest.ToyStudent{}
	return vllmtest.Start(
		vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
			if text, ok := student.Turn(in); ok {
				return text, true
			}
			return toy.Turn(in)
		}),
		vllmtest.WithChatScript(Judge),
		vllmtest.WithMaxLogprobs(topK),
	)
}

// Banner is the line the example programs print first when they run on the
// simulator; roles says what it plays.
func Banner(sim *vllmtest.Server, roles string) string {
	return fmt.Sprintf("SIMULATOR: vllmtest at %s plays %s (a scripted test and demo backend, not a language model)", sim.URL, roles)
}
