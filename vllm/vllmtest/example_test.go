package vllmtest_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// A scripted agent turn, generated through the real client from token ids.
func Example() {
	s, err := vllmtest.Start(vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		return fmt.Sprintf("Turn %d: hello, %s!", in.Turn, in.Messages[len(in.Messages)-1].Content), true
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	ctx := context.Background()
	c := s.Client()
	r, err := c.Render(ctx, rollout.RenderRequest{
		Messages:            []chat.Message{{Role: chat.RoleUser, Content: "world"}},
		AddGenerationPrompt: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := c.Generate(ctx, rollout.GenerateRequest{Prompt: r.Tokens, MaxTokens: 64, Sampling: sampling.Neutral(1)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", s.Decode(r.Tokens))
	fmt.Printf("%q %s, last id is <|im_end|>: %v\n", g.Text, g.FinishReason, g.Tokens[len(g.Tokens)-1] == vllmtest.ImEnd)
	// Output:
	// "<|im_start|>user\nworld<|im_end|>\n<|im_start|>assistant\n"
	// "Turn 1: hello, world!" stop, last id is <|im_end|>: true
}
