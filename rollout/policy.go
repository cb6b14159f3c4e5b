package rollout

import (
	"context"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/sampling"
)

// Policy is what the agent needs from an inference engine: the server's own chat
// template, and generation from token ids.
//
// Implementations must be safe for concurrent use and honour ctx.
// [github.com/agentic-opd/agenticopd/vllm.Client] implements Policy over vLLM's
// /tokenize and /v1/completions.
type Policy interface {
	// Render turns messages (and tool definitions) into token ids with the server's chat
	// template, exactly as /tokenize in chat form does. It never adds a BOS of its own.
	Render(ctx context.Context, req RenderRequest) (Rendered, error)
	// Generate samples one continuation of a token-id prompt.
	Generate(ctx context.Context, req GenerateRequest) (Generation, error)
}

// RenderRequest is a chat-form /tokenize request.
type RenderRequest struct {
	Messages            []chat.Message // the conversation to render
	Tools               []chat.Tool    // the tools the template renders; nil for none
	AddGenerationPrompt bool           // append the opening of an assistant turn
	// ChatTemplateKwargs is passed to the template (for example enable_thinking).
	ChatTemplateKwargs map[string]any
}

// Rendered is the template's output.
type Rendered struct {
	Tokens []int32 // the rendered token ids
	// MaxModelLen is the server's context length, 0 when it did not say.
	MaxModelLen int
}

// GenerateRequest asks for one sampled continuation of Prompt.
type GenerateRequest struct {
	Prompt    []int32 // the token-id prompt to continue
	MaxTokens int     // bound on the generated tokens
	// Sampling is every parameter that shapes the draw of a token; a Policy must send
	// each of them, so that no server default decides (see package sampling). Its
	// Temperature is used as given: 0 means greedy.
	Sampling sampling.Params
	// Seed, when non-nil, makes sampling reproducible on servers that honour it.
	Seed *int64
	// Messages is the conversation Prompt renders (the agent's messages so far), for
	// policies whose server takes messages rather than ids (a NeMo Gym model server).
	// Prompt stays the ids the trajectory records; such a policy must check that the
	// server's prompt equals it. A Policy must not modify Messages.
	Messages []chat.Message
}

// Generation is one sampled continuation.
type Generation struct {
	// Tokens are the generated ids, including the stop token that ended generation.
	Tokens []int32
	// Logprobs[i] is the sampling logprob of Tokens[i].
	Logprobs []float32
	// Text is Tokens decoded with special tokens kept; used only for parsing tool calls.
	Text string
	// FinishReason is "stop" or "length".
	FinishReason string
	// PromptTokens echoes the prompt ids the server saw, when it reports them.
	PromptTokens []int32
}

// Finish reasons reported in [Generation.FinishReason].
const (
	FinishStop   = "stop"   // ended by a stop token
	FinishLength = "length" // cut at MaxTokens or the context length
)
