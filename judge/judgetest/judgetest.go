// Package judgetest checks that a [judge.Judge] keeps the contract that package opd
// relies on. It is for authors of their own judges:
//
//	func TestMyJudge(t *testing.T) {
//		judgetest.Run(t, func() judge.Judge { return myjudge.New(fakeModel) })
//	}
//
// The checks, each a subtest of [Run] and a part of [TestJudge]'s error:
//   - CancelledContext: a call with an already cancelled context returns an error that
//     is (errors.Is) context.Canceled.
//   - ExpiredDeadline: a call with an expired deadline returns context.DeadlineExceeded.
//   - WellFormed: calls on the [SampleTurns] return no error and a hint that passes
//     [CheckHint].
//   - Concurrent: the same calls from several goroutines at once give well-formed hints
//     (run the test with -race to catch data races).
//   - TurnUnchanged: the judge does not modify the turn it is given.
//
// A judge under test should talk to a fake model: the checks make a few dozen calls.
package judgetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
)

// Concurrency is the number of goroutines of the Concurrent check.
const Concurrency = 8

type check struct {
	name string
	run  func(j judge.Judge) error
}

var checks = []check{
	{"CancelledContext", checkCancelled},
	{"ExpiredDeadline", checkDeadline},
	{"WellFormed", checkWellFormed},
	{"Concurrent", checkConcurrent},
	{"TurnUnchanged", checkUnchanged},
}

// Run runs every check as a subtest of t, each on a judge made by newJudge.
func Run(t *testing.T, newJudge func() judge.Judge) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(newJudge()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestJudge runs every check on j and returns every violation found, joined with
// errors.Join, or nil.
func TestJudge(j judge.Judge) error {
	var errs []error
	for _, c := range checks {
		if err := c.run(j); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// CheckHint reports whether h is well formed:
//   - every vote's Score is 1, -1 or 0;
//   - a vote has an Unparsed reason if and only if its Score is 0;
//   - hints carry no surrounding white space ([judge.Strip] leaves them unchanged);
//   - a non-empty Text is the Hint of a vote with Score 1.
func CheckHint(h judge.Hint) error {
	var errs []error
	for i, v := range h.Votes {
		switch {
		case v.Score != 1 && v.Score != -1 && v.Score != 0:
			errs = append(errs, fmt.Errorf("vote %d: score %d, want 1, -1 or 0", i, v.Score))
		case v.Score == 0 && v.Unparsed == "":
			errs = append(errs, fmt.Errorf("vote %d: score 0 without an Unparsed reason", i))
		case v.Score != 0 && v.Unparsed != "":
			errs = append(errs, fmt.Errorf("vote %d: score %d with Unparsed reason %q", i, v.Score, v.Unparsed))
		}
		if judge.Strip(v.Hint) != v.Hint {
			errs = append(errs, fmt.Errorf("vote %d: hint %q has surrounding white space", i, v.Hint))
		}
	}
	if judge.Strip(h.Text) != h.Text {
		errs = append(errs, fmt.Errorf("hint text %q has surrounding white space", h.Text))
	}
	if h.Text != "" && !fromPositiveVote(h) {
		errs = append(errs, fmt.Errorf("hint text %q is not the hint of a vote with score 1", h.Text))
	}
	return errors.Join(errs...)
}

func fromPositiveVote(h judge.Hint) bool {
	for _, v := range h.Votes {
		if v.Score == 1 && v.Hint == h.Text {
			return true
		}
	}
	return false
}

// SampleTurns returns the turns the checks use: a tool next state after a text-and-tool
// turn, a tool-call-only turn, a user next state, and an empty context. Each call
// returns fresh values.
func SampleTurns() []judge.Turn {
	call := func(name, args string) []chat.ToolCall {
		return []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}}}
	}
	sys := chat.Message{Role: chat.RoleSystem, Content: "You are a skilled Python programmer."}
	task := chat.Message{Role: chat.RoleUser, Content: "Write fizzbuzz(n) in solution.py and test it."}
	write := chat.Message{Role: chat.RoleAssistant, Content: "I'll write the solution.",
		ToolCalls: call("write_file", `{"path":"solution.py","content":"def fizzbuzz(n):\n    return []\n"}`)}
	return []judge.Turn{
		{
			Context:       []chat.Message{sys, task},
			Assistant:     write,
			NextState:     `{"bytes_written": 36}`,
			NextStateRole: chat.RoleTool,
		},
		{
			Context: []chat.Message{sys, task, write, {Role: chat.RoleTool, ToolCallID: "call_1", Content: `{"bytes_written": 36}`}},
			Assistant: chat.Message{Role: chat.RoleAssistant,
				ToolCalls: call("terminal", `{"command":"python test_solution.py"}`)},
			NextState:     `{"output": "AssertionError: fizzbuzz(15) returned []", "exit_code": 1}`,
			NextStateRole: chat.RoleTool,
		},
		{
			Context:       []chat.Message{task},
			Assistant:     chat.Message{Role: chat.RoleAssistant, Content: "Done: all tests pass."},
			NextState:     "They do not; fizzbuzz(0) should return an empty list.",
			NextStateRole: chat.RoleUser,
		},
		{
			Assistant:     chat.Message{Role: chat.RoleAssistant, Content: "Hello."},
			NextState:     "Hi.",
			NextStateRole: chat.RoleUser,
		},
	}
}

func checkCancelled(j judge.Judge) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := j.Judge(ctx, SampleTurns()[0])
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Judge.Judge with a cancelled context returned error %v, want context.Canceled", err)
	}
	return nil
}

func checkDeadline(j judge.Judge) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadlinePast)
	defer cancel()
	_, err := j.Judge(ctx, SampleTurns()[0])
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Judge.Judge with an expired deadline returned error %v, want context.DeadlineExceeded", err)
	}
	return nil
}

func judgeOne(j judge.Judge, i int, turn judge.Turn) error {
	h, err := j.Judge(context.Background(), turn)
	if err != nil {
		return fmt.Errorf("sample turn %d: Judge returned error %w; want a hint (errors are only for an ended context or misconfiguration)", i, err)
	}
	if err := CheckHint(h); err != nil {
		return fmt.Errorf("sample turn %d: %w", i, err)
	}
	return nil
}

func checkWellFormed(j judge.Judge) error {
	var errs []error
	for i, turn := range SampleTurns() {
		errs = append(errs, judgeOne(j, i, turn))
	}
	return errors.Join(errs...)
}

func checkConcurrent(j judge.Judge) error {
	n := len(SampleTurns())
	errs := make([]error, Concurrency*n)
	var wg sync.WaitGroup
	for g := range Concurrency {
		// Each goroutine gets its own turns: sharing is the judge's business only.
		for i, turn := range SampleTurns() {
			wg.Go(func() {
				errs[g*n+i] = judgeOne(j, i, turn)
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

func checkUnchanged(j judge.Judge) error {
	var errs []error
	for i, turn := range SampleTurns() {
		want := cloneTurn(turn)
		if _, err := j.Judge(context.Background(), turn); err != nil {
			errs = append(errs, fmt.Errorf("sample turn %d: %w", i, err))
			continue
		}
		if !equalTurn(want, turn) {
			errs = append(errs, fmt.Errorf("sample turn %d: Judge modified the turn it was given", i))
		}
	}
	return errors.Join(errs...)
}

// deadlinePast is a deadline long gone.
var deadlinePast = time.Unix(0, 0)

func cloneTurn(t judge.Turn) judge.Turn {
	t.Context = chat.Clone(t.Context)
	t.Assistant = chat.Clone([]chat.Message{t.Assistant})[0]
	return t
}

func equalTurn(a, b judge.Turn) bool { return reflect.DeepEqual(a, b) }
