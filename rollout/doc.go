// Package rollout runs one agent on one task and records what happened token by token.
//
// The pieces:
//   - [Policy]: the inference engine (server-side chat template, generation from ids).
//   - [Sandbox] and [SandboxFactory]: the confined workspace a rollout's commands run in.
//     The bubblewrap implementation lives in package
//     [github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap]; package
//     [github.com/agentic-opd/agenticopd/rollout/rollouttest] checks any
//     implementation against the contract. [Starter] is the optional streaming start
//     ([Process]: stdin and stdout pipes) that the verifier of package reward needs;
//     [Restorer] the optional repair of a workspace the agent locked, which the
//     verifier calls first; [SpecFactory] the optional sandbox for a [SandboxSpec]
//     (a task's container image, its working directory, the network), which
//     repository tasks need.
//   - [Trajectory]: the token-exact record: ordered segments, sampled logprobs, the span
//     of every assistant turn, and the OpenAI-format messages.
//   - [Agent]: the multi-turn tool loop that produces a Trajectory.
//   - [Template]: the server's chat template, calibrated once, giving the exact token
//     delta for appended messages (tool results, hints).
//   - [Tool], [DefaultTools]: terminal, read_file, write_file, patch and search_files.
//   - [ToolCallParser], [Hermes]: tool calls read from generated text.
//
// # The loop
//
// [Agent.Run] renders the first messages once with the generation prompt and splits
// the result into a [SegPrompt] and a [SegGenPrompt] segment. Each turn then sends the
// held ids to [Policy.Generate], checks that the prompt the server echoes is the one
// sent, and appends the generated ids verbatim as [SegSampled] with their logprobs. The
// end of the turn is classified (reference multiturn-tokenization §4.3):
//
//   - the template's close token: the turn is closed and the template's separator
//     (ChatML "\n") is appended as [SegSeparator];
//   - another stop id (for Qwen <|endoftext|>): kept as sampled, treated as the close,
//     separator appended, counted as alt_close;
//   - cut at max_tokens: by default the episode ends with [StopTruncated]; with
//     Config.ContinueTruncated the close is appended as [SegCloseSynth] (never trained
//     on), counted as synth_close, and the loop goes on.
//
// Tool calls are parsed from the generated text, run in order in the rollout's
// sandbox, and their results appended as ONE delta for the whole step: the template's
// rendering of the tool messages ([SegDelta]), followed by the next generation prompt
// ([SegGenPrompt]) when the episode continues. A trajectory never ends with a
// generation prompt that opened no turn. The loop stops at a turn without tool calls, at
// Config.MaxTurns, when the held ids plus Config.MinGenerateTokens no longer fit the
// server's max_model_len (each turn's max_tokens is also lowered to what fits), on a
// policy error, on a prompt echo mismatch, or on template drift; each is recorded in
// Trajectory.Stop, none is a Go error.
//
// The file tools take workspace-relative paths; a path under the sandbox's workspace
// directory as commands see it (/workspace for bubblewrap) is made relative, and any
// other absolute path, or one that climbs out with "..", is refused.
//
// Tool calls get ids "call_<turn>_<i>" (both 0-based) and one tool message each, with
// tool_call_id set. An invalid call (bad JSON, no name, arguments that are not an
// object, an unclosed block) and a call of an unknown tool get an error result naming
// the available tools; an invalid call is recorded with the name it had, if any, and
// its raw text as arguments, and its index is listed in [Turn.InvalidCalls] (a chat
// template cannot render that text as arguments; the opd package renders it as text).
//
// # The file tools on the host
//
// read_file, write_file, patch and search_files run in the library's process, on the
// Sandbox's file methods and its [Sandbox.FS] view, so whatever the agent leaves in
// the workspace they hold a bounded amount per call: read_file streams the file up to
// the lines asked for, keeping 4 KiB of each line and reading at most 64 MiB into the
// file (a line beyond that is refused with an error that names the cap and says to
// use the terminal), and counts the remaining lines in chunks; patch refuses a file,
// or a result, over 1 MiB; search_files reads files of up to 1 MiB line by line,
// says how many larger ones it did not search, and reads directories in batches of
// 256 entries, at most 200,000 entries and 64 levels deep. A FIFO or device the
// agent planted is refused before it is opened. Each call allocates well under 8 MiB
// on a 1 GiB file (TestFileToolsAreBoundedOnHugeFiles).
//
// They are bounded in time and work too. Each call has a deadline
// (ToolsConfig.FileToolTimeout, 10 s), checked every 256 KiB read and every 256
// directory entries. search_files refuses a pattern over 4096 bytes, or one that
// compiles to more than 1,000 instructions (a loose bound over 8,000 refuses it
// before it is compiled: a few bytes such as x{999} repeated can compile to
// millions), and reads at most 64 MiB and matches at most 2^27 instruction-bytes per
// call: each line costs its length plus one times the pattern's instructions (one
// for a plain literal), which bounds what Go's regexp engines do on it, and a line
// that would pass the budget is not matched. One call of Go's regexp cannot be
// interrupted, so none is given more than 4 KiB: a longer line is matched in windows
// of 4 KiB, each starting 3 KiB after the last, the deadline and the budget checked
// before each (one window of a 1,000-instruction pattern is a few hundred
// milliseconds at worst, where one call on a 131 KB line took 14 s of a loaded
// host). The rule, which the result's note states when it applied: a match of up to
// 1 KiB is found wherever it lies in the line, a longer one only when it lies within
// one window; ^, \A, $ and \z match only where the line begins or ends (a window
// that does not begin or end the line is matched with a variant of the pattern in
// which they never match there); \b and \B see a window's edges as the line's; a
// plain literal, a substring search, is searched whole (TestSearchFilesWindowRule,
// TestSearchFilesLongLine; BenchmarkSearchFilesLongLine measured 0.6 to 0.8 s of
// host CPU per call on a 131 KB or 1 MiB line, stopped at the budget or done, with
// no match call over 4,096 bytes). Every call counts its wall time, the
// bytes it reads and writes and its matching against its rollout's account
// ([WithToolBudget]; [Agent.Run] starts one per rollout): 2 min of host time
// (ToolsConfig.RolloutFileToolTime), 1 GiB, and 16 searches' worth of matching;
// past them the file tools refuse. A call stopped at a cap returns what it found
// so far (search_files: the matches, truncated) with an "error" that names the cap
// and says what to do instead (a narrower path or pattern, or the terminal, which
// the sandbox bounds). A crafted pattern over 4 MB took 32 s of host CPU before
// these caps; TestSearchFilesIsBoundedInWork and BenchmarkSearchFilesCraftedPattern
// measure it now.
//
// # Deltas and drift
//
// [Template] implements the fixed-base diff of reference multiturn-tokenization §2.2
// and §4.2–§4.4 through [Policy.Render] only: for appended messages M it renders B and
// B+M with the same tools and chat_template_kwargs, asserts that ids(B) is a prefix of
// ids(B+M), and checks the suffix's shape (no BOS; starts with the turn-start token;
// ends with the generation prompt G when asked; one turn-start and one close token per
// rendered turn, which also catches special-token literals such as "<|im_end|>" inside
// tool output). The default base ends with a user message, so Qwen3's thinking rules
// cannot change its rendering; calibration picks, per role, the first base that renders
// that role's probes prefix-stably (tool results may need the base plus an assistant
// turn that called the tools; user messages the base without its user message), and a
// delta that fails its checks is tried once more on the role's other base (reference
// §4.7) before the drift rule applies. Because deltas never re-render held history, reasoning kept in
// earlier turns, empty think blocks of a non-thinking generation prompt and the
// model's own tool-call JSON stay exactly as the model saw them.
//
// The drift rule: when a delta fails its prefix or shape check (or the template cannot
// be calibrated), the episode stops at that turn with [StopTemplateDrift], the failing
// delta is not appended (the tool messages stay in Trajectory.Messages), the sampled
// ids are never "repaired", and the event is counted in [Stats].TemplateDrift, metric
// "rollout/template_drift". A trajectory therefore only ever holds ids the server's
// template produced or the model sampled.
//
// # Metrics
//
// [Agent.RunStats] returns a rollout's [Stats]; [Agent.Stats] sums them over the
// Agent's life. [Stats.Metrics] names them: rollout/template_drift,
// rollout/prompt_echo_mismatch, rollout/alt_close, rollout/synth_close,
// rollout/truncated_turns, rollout/invalid_tool_calls, rollout/unknown_tool_calls,
// rollout/tool_calls, rollout/rollouts.
//
// # For teacher scoring
//
// Trajectory.Turns[k].GenPromptStart is where the generation prompt that opened turn k
// starts: an inline hint H goes there. H is Template.Delta(ctx, []chat.Message{{Role:
// "user", Content: hint}}, false), with the same Template as the agent's
// ([Agent.Template]). Turns[k].Start and End bound the sampled ids, including the
// close token the model generated.
package rollout
