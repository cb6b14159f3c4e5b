package agenticopd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// An Env needs a Policy; everything else has a default.
func ExampleNewEnv() {
	_, err := agenticopd.NewEnv(agenticopd.Config{})
	fmt.Println(errors.Is(err, agenticopd.ErrInvalidConfig), err)
	// Output: true agenticopd: invalid Config: Policy is required
}

// CollectGroup runs GroupSize rollouts of a task and returns them with the Atropos
// group. Here the simulator's student runs one command and stops.
func ExampleEnv_CollectGroup() {
	agent := func(in vllmtest.ScriptInput) (string, bool) {
		if in.Turn == 1 {
			return `<tool_call>{"name": "terminal", "arguments": {"command": "echo hi"}}</tool_call>`, true
		}
		return "Done.", true
	}
	sim, err := vllmtest.Start(vllmtest.WithAgentScript(agent), vllmtest.WithMaxLogprobs(50))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sim.Close()
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, KeepEqualScores: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.Task.ID, g.Data.Len(), "sequences,", g.Rollouts[0].Trajectory.TurnsUsed, "turns each")
	fmt.Println(g.Data.Validate(atropos.ValidateOptions{}))
	// Output:
	// fizzbuzz 2 sequences, 2 turns each
	// <nil>
}

// Process writes n groups as JSON Lines and, with ReportPath, the HTML inspector.
func ExampleEnv_Process() {
	dir, err := os.MkdirTemp("", "process-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	agent := func(in vllmtest.ScriptInput) (string, bool) { return "I cannot run anything.", true }
	sim, err := vllmtest.Start(vllmtest.WithAgentScript(agent), vllmtest.WithMaxLogprobs(50))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sim.Close()
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2,
		ReportPath: filepath.Join(dir, "report.html")})
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.Create(filepath.Join(dir, "groups.jsonl"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	if err := env.Process(context.Background(), 2, f); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Metrics()["env/groups"], "groups")
	_, err = os.Stat(filepath.Join(dir, "report.html"))
	fmt.Println("report:", err == nil)
	// Output:
	// 2 groups
	// report: true
}
