// Package judge finds hindsight hints: for an assistant turn and the state that followed
// it, a [Judge] says whether the next state shows how the turn could have been better
// and, if so, gives a short hint. Package opd turns the hints into distillation data.
//
// # The LLM judge
//
// [LLM] follows the reference environment's prompt contract, written in this library's
// words ([SystemPrompt]): the model acts as a process reward model, reads the assistant
// turn and the next state with its role ("user" or "tool", with the caveat that a
// successful tool result generally means the call was fine), and answers with exactly
// one \boxed{1} or \boxed{-1}, plus a concrete 1–3 sentence hint between [HINT_START]
// and [HINT_END] when, and only when, it answers 1. Unlike the reference, the judge also
// sees the action: the assistant's tool calls (name and arguments) follow its text.
//
// The PRMVotes votes (3 by default) are asked for in one chat request with n set; when
// a server returns fewer choices (one, when it ignores n), the missing votes are asked
// for in separate single-choice requests, each read by the same rules; extra choices
// are ignored. Defaults: temperature 0.7, no truncation, no penalty, 500 output tokens;
// every request states each of them (see package sampling), so a server's
// --generation-config defaults never decide. Requests carry chat_template_kwargs,
// {"enable_thinking": false} by default: a Qwen3-class judge thinks otherwise.
//
// # What is never a vote
//
// A hint reaches the teacher, so text the judge did not give as its answer must never
// become one. A judge may think although thinking was turned off (a thinking-only
// model ignores enable_thinking), with or without a reasoning parser on the server:
//   - A choice the server cut at max_tokens (finish_reason "length") is not parsed at
//     all: without a reasoning parser a cut thought arrives as content, and a hint
//     drafted mid-thought would be taken. It is [UnparsedTruncated]; the root package
//     counts it as judge/truncated_votes. A choice ended for any other reason than a
//     stop ("abort", "tool_calls", …) is [UnparsedUnfinished]. A choice whose finish
//     reason is unknown (a server that sends finish_reason null or leaves it out, or
//     a [ChatModel] that reports none) may have been cut just the same, so it is not
//     read either: it is [UnparsedUnknownFinish], counted with the unparsable votes,
//     and LLMConfig.Logger is told once. [github.com/agentic-opd/agenticopd/vllm.Client]
//     reports the server's reasons ("" where the server gave none).
//   - Thinking in the content is removed before parsing (see [ParseVote]): closed
//     <think>…</think> blocks, an unclosed <think> to the end, and everything before a
//     </think> that has no opening tag (a Qwen3-style template opens the block in the
//     prompt, so the content starts mid-thought). Nothing left is [UnparsedOnlyThinking].
//   - The reasoning a server's parser split off ("reasoning", "reasoning_content") is
//     never read. A choice with an empty content is [UnparsedEmptyContent], even when
//     its reasoning holds a decision.
//   - An answer with two different \boxed{…} decisions is
//     [UnparsedConflictingDecisions], not its last one.
//
// These rules may lose a real verdict, but never take a decision or a hint from a
// thought, a cut or a contradiction; a vote so refused counts as neither side in
// [Majority], like any unreadable vote. Raise MaxTokens when many votes are truncated.
//
// # Parsing
//
// [ParseVote] reads an answer as the reference does: \boxed{-?DIGITS} read as an integer
// and kept only when it is 1 or -1, and the last hint block, stripped. Output that
// cannot be read, and requests that fail, become votes with Score 0 and a reason in
// [Vote.Unparsed] (the Unparsed constants: [UnparsedNoDecision], [UnparsedBadDecision],
// [UnparsedRequestFailed], [UnparsedMissingChoice] and the ones above); they never
// make Judge fail. Judge returns an error only when its context ends.
//
// # Selection
//
// A [Selector] picks the hint from the votes. Both built-in selectors consider only
// votes with Score 1 whose hint is longer than [MinHintChars] (10) code points, and
// prefer the longest such hint, the first on ties.
//   - [Majority] (the default) requires more positive than negative votes.
//   - [LongestPositive] is the reference's rule: one positive vote suffices.
//
// The reference called its rule a majority vote but did not count votes; Majority is the
// default here because one stray positive sample out of three is weak evidence that the
// next state holds a lesson.
//
// # Writing a judge
//
// Any type with a Judge method, or a function through [Func], can be a judge.
// Package [github.com/agentic-opd/agenticopd/judge/judgetest] checks a judge against
// the contract: it honours a cancelled context, is safe for concurrent use and returns
// well-formed hints.
package judge
