package main

import (
	"testing"

	"github.com/agentic-opd/agenticopd/internal/printcheck"
)

// TestFailingTasksErrorAsPrinted: cli.Main prints the error after the program's name,
// so the error does not name the program again.
func TestFailingTasksErrorAsPrinted(t *testing.T) {
	printed := "validate-tasks: " + ErrInvalidTasks.Error()
	if p := printcheck.RepeatedPrefix(printed); p != "" {
		t.Errorf("%q repeats %q", printed, p)
	}
}
