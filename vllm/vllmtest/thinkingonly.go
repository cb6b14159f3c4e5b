package vllmtest

import "strings"

// WithThinkingOnlyTemplate makes the chat template behave as a thinking-only model's
// (Qwen3's "Thinking-2507" releases): the generation prompt always opens a thought,
// "<|im_start|>assistant\n<think>\n", whatever chat_template_kwargs say, so
// enable_thinking: false has no effect and a generation starts mid-thought, ending
// its thinking with "</think>" before the answer. Without [WithReasoningParser] the
// thought arrives as content; with it, the text before the first "</think>" is the
// reasoning (all of it, and a null content, when the thought is never closed), as
// vLLM's reasoning parsers read a thought the prompt opened. Other turns render as
// they would otherwise.
func WithThinkingOnlyTemplate() Option { return func(c *config) { c.thinkOnly = true } }

// thinkingOnlyPrompt is the generation prompt of a thinking-only template.
const thinkingOnlyPrompt = "<|im_start|>assistant\n<think>\n"

// splitGenerated splits a generated text into reasoning and content for a server with
// a reasoning parser. With a thinking-only template the prompt opened the thought, so
// the text is read as if it began with "<think>".
func (s *Server) splitGenerated(text string) (reasoning string, content any, ok bool) {
	if s.cfg.thinkOnly && !strings.HasPrefix(strings.TrimLeft(text, "\n"), "<think>") {
		text = "<think>" + text
	}
	return splitReasoning(text)
}
