package kube_test

import (
	"context"
	"testing"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// verifyBuiltin grades the first built-in task's reference solution, and a wrong
// one, with f as both the rollout's and the tests' factory: the verifier's relay
// between two pods' Start streams, over exec.
func verifyBuiltin(t *testing.T, f rollout.SandboxFactory) {
	task := tasks.Builtin()[0]
	for _, tc := range []struct {
		name     string
		solution string
		pass     bool
	}{
		{"reference", task.ReferenceSolution, true},
		{"wrong", "def nothing():\n    return None\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := f.NewSandbox(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if err := sb.WriteFile("solution.py", []byte(tc.solution)); err != nil {
				t.Fatal(err)
			}
			v, err := reward.Verify(context.Background(), sb, f, task, reward.VerifyOptions{})
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if v.Passed() != tc.pass {
				t.Errorf("passed %v (C %.2f, rule %s: %s)\ntests:\n%s\nsolution:\n%s", v.Passed(), v.Correctness, v.Rule, v.Reason, v.Output, v.SolutionOutput)
			}
		})
	}
}

func TestVerifyFake(t *testing.T) {
	f, _ := newFactory(t, nil)
	verifyBuiltin(t, f)
}

func TestClusterVerify(t *testing.T) {
	verifyBuiltin(t, realFactory(t, nil))
}
