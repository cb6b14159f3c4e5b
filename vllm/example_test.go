package vllm_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// A policy turn: render the conversation with the server's template, then generate
// from the token ids. The simulator stands in for a vLLM server.
func ExampleClient_Generate() {
	sim, err := vllmtest.Start(vllmtest.WithAgentScript(func(vllmtest.ScriptInput) (string, bool) {
		return "Let me read the failing test.", true
	}))
	if err != nil {
		panic(err)
	}
	defer sim.Close()

	c, err := vllm.NewClient(sim.URL)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	prompt, err := c.Render(ctx, rollout.RenderRequest{
		Messages:            []chat.Message{{Role: chat.RoleUser, Content: "The tests fail. Fix them."}},
		AddGenerationPrompt: true,
		ChatTemplateKwargs:  map[string]any{"enable_thinking": false},
	})
	if err != nil {
		panic(err)
	}
	gen, err := c.Generate(ctx, rollout.GenerateRequest{Prompt: prompt.Tokens, MaxTokens: 64, Sampling: sampling.Neutral(1)})
	if err != nil {
		panic(err)
	}
	last := gen.Tokens[len(gen.Tokens)-1]
	fmt.Println(gen.FinishReason, last == vllmtest.ImEnd, len(gen.Logprobs) == len(gen.Tokens))
	fmt.Println(sim.Decode(gen.Tokens[:len(gen.Tokens)-1]))
	// Output:
	// stop true true
	// Let me read the failing test.
}

// Teacher scoring: top-K at chosen positions, and what happens when K exceeds the
// server's --max-logprobs.
func ExampleClient_Score() {
	sim, err := vllmtest.Start()
	if err != nil {
		panic(err)
	}
	defer sim.Close()
	c := sim.Client()
	ctx := context.Background()

	tokens := sim.Tokenize("def add(a, b):\n    return a + b\n")
	res, err := c.Score(ctx, scorer.Request{K: 5, Sequences: []scorer.Sequence{{Tokens: tokens, Positions: []int{1, 2, 3}}}})
	if err != nil {
		panic(err)
	}
	ids, _ := res.Sequences[0].Top(0)
	fmt.Println(len(res.Sequences[0].TokenLogprobs), len(ids))

	_, err = c.Score(ctx, scorer.Request{K: 50, Sequences: []scorer.Sequence{{Tokens: tokens, Positions: []int{1}}}})
	var ml *vllm.MaxLogprobsError
	fmt.Println(errors.Is(err, vllm.ErrMaxLogprobs), errors.As(err, &ml) && ml.Max == 20)
	// Output:
	// 3 5
	// true true
}
