// Package rollout runs one agent on one task and records what happened token by token.
//
// The pieces:
//   - [Policy]: the inference engine (server-side chat template, generation from ids).
//   - [Sandbox] and [SandboxFactory]: the confined workspace a rollout's commands run in.
//     The bubblewrap implementation lives in package
//     [github.com/agentic-opd/agenticopd/rollout/sandbox].
//   - [Trajectory]: the token-exact record: ordered segments, sampled logprobs, the span
//     of every assistant turn, and the OpenAI-format messages.
package rollout
