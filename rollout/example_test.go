package rollout_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// An agent against the vLLM simulator, in the bubblewrap sandbox: the scripted model
// writes a file, runs it, and answers.
func ExampleAgent_Run() {
	ctx := context.Background()
	turns := []string{
		`<tool_call>{"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hello')\n"}}</tool_call>`,
		`<tool_call>{"name": "terminal", "arguments": {"command": "python3 hello.py"}}</tool_call>`,
		"It prints hello.",
	}
	srv, err := vllmtest.Start(vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		return turns[min(in.Turn, len(turns))-1], true
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	sandboxes, err := bwrap.New(ctx, bwrap.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := sandboxes.NewSandbox(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	agent, err := rollout.NewAgent(srv.Client(), rollout.Config{MaxTurns: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := agent.Run(ctx, []chat.Message{
		{Role: chat.RoleSystem, Content: "You are a Python programmer."},
		{Role: chat.RoleUser, Content: "Write hello.py and run it."},
	}, sb)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stop:", tr.Stop, "turns:", tr.TurnsUsed)
	fmt.Println("terminal said:", tr.Messages[5].Content)
	fmt.Println("answer:", tr.Messages[6].Content)
	trained := 0
	for _, m := range tr.Masks() {
		if m != rollout.MaskIgnore {
			trained++
		}
	}
	fmt.Println("trained tokens = sampled tokens:", trained == tr.Turns[0].End-tr.Turns[0].Start+
		tr.Turns[1].End-tr.Turns[1].Start+tr.Turns[2].End-tr.Turns[2].Start)
	// Output:
	// stop: no_tool_calls turns: 3
	// terminal said: {"output":"hello","exit_code":0,"error":""}
	// answer: It prints hello.
	// trained tokens = sampled tokens: true
}
