package judge

import (
	"context"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/sampling"
)

// Judge decides whether the state after an assistant turn shows, in hindsight, how the
// turn could have been better, and if so returns a short hint.
//
// Implementations must be safe for concurrent use and must return promptly with
// ctx.Err() once ctx ends. A judge that cannot make sense of its model's output returns
// a Hint with no text (and the reason in its votes), not an error: errors are for
// failures that should stop the caller (ctx ended, misconfiguration).
type Judge interface {
	// Judge returns the hint for one turn pair.
	Judge(ctx context.Context, turn Turn) (Hint, error)
}

// Turn is what a judge sees: an assistant turn and the state that followed it.
type Turn struct {
	// Context is every message before the assistant turn.
	Context []chat.Message
	// Assistant is the turn itself: its text and its tool calls.
	Assistant chat.Message
	// NextState is the text of the messages that followed, each cut and joined as the
	// reference does ("\n---\n" between messages).
	NextState string
	// NextStateRole is the role of the first message of the next state: "tool" or "user".
	NextStateRole string
}

// Hint is a judge's verdict on one turn.
type Hint struct {
	// Text is the selected hint; "" means no hint.
	Text string
	// Votes are the individual votes behind the verdict, in request order.
	Votes []Vote
}

// Vote is one judge sample.
type Vote struct {
	// Score is 1, -1, or 0 when no valid decision was found.
	Score int
	// Hint is the parsed hint text, "" if none.
	Hint string
	// Raw is the model's output.
	Raw string
	// Unparsed, when non-empty, says why the vote could not be read (for metrics).
	Unparsed string
}

// Func adapts an ordinary function to a Judge.
type Func func(ctx context.Context, turn Turn) (Hint, error)

// Judge calls f(ctx, turn).
func (f Func) Judge(ctx context.Context, turn Turn) (Hint, error) { return f(ctx, turn) }

// ChatModel is the chat endpoint an LLM judge talks to.
// [github.com/agentic-opd/agenticopd/vllm.Client] implements it over
// /v1/chat/completions. Implementations must be safe for concurrent use, and must
// report each choice's finish reason ([ChatResponse.FinishReasons]): without it, the
// LLM judge cannot tell an output cut at max_tokens from a finished one, and reads no
// vote from it ([UnparsedUnknownFinish]).
type ChatModel interface {
	// Chat sends req and returns its N choices.
	Chat(ctx context.Context, req ChatRequest) (ChatResponse, error)
}

// ChatRequest is one chat completion request. An implementation sends every field:
// each sampling parameter and the output bound, so that no server default decides.
type ChatRequest struct {
	Messages []chat.Message // the conversation to complete
	N        int            // number of choices asked for
	// Sampling is used as given (Temperature 0 is greedy; the other zero values are
	// off, see package sampling).
	Sampling sampling.Params
	// MaxTokens bounds each choice's output; it is ≥ 1.
	MaxTokens int
	// ChatTemplateKwargs are passed to the server's chat template, for example
	// {"enable_thinking": false}.
	ChatTemplateKwargs map[string]any
}

// ChatResponse holds the text of each returned choice, in order. A server may return
// fewer choices than N asked for.
type ChatResponse struct {
	// Choices are the contents; a null content is "".
	Choices []string
	// Reasoning, when not nil, is parallel to Choices: the text a server's reasoning
	// parser split off the content ("reasoning", or "reasoning_content" on older
	// vLLM), "" where there was none. A judge never reads a decision from it.
	Reasoning []string
	// FinishReasons is parallel to Choices: why the server ended each choice ("stop",
	// "length" when max_tokens cut it, or another server reason such as "abort"), ""
	// where it did not say. The LLM judge parses only choices that stopped; a choice
	// whose reason is "" or missing may have been cut, and is [UnparsedUnknownFinish].
	FinishReasons []string
}
