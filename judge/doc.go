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
// a server returns fewer choices, the missing votes are asked for in separate
// single-choice requests. Defaults: temperature 0.7, no truncation, no penalty, 500
// output tokens; every request states each of them (see package sampling), so a
// server's --generation-config defaults never decide. Requests carry
// chat_template_kwargs, {"enable_thinking": false} by default: a Qwen3-class judge
// thinks otherwise, and behind a reasoning parser a judge that spent its budget
// thinking answers with a null content. Such a choice is the vote
// [UnparsedEmptyContent]; its reasoning is never read for a decision.
//
// # Parsing
//
// [ParseVote] reads an output exactly as the reference does: the last \boxed{-?DIGITS},
// read as an integer and kept only when it is 1 or -1, and the last hint block, stripped.
// Output that cannot be read, and requests that fail, become votes with Score 0 and a
// reason in [Vote.Unparsed] ([UnparsedNoDecision], [UnparsedBadDecision],
// [UnparsedRequestFailed], [UnparsedMissingChoice]); they never make Judge fail. Judge
// returns an error only when its context ends.
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
