// Package nemogym serves an agentic OPD environment as a NeMo Gym agent server, so
// that NeMo RL (and the other trainers that speak NeMo Gym's rollout protocol: verl,
// OpenRLHF, Unsloth) can train on its rollouts.
//
// # The agent server
//
// [Server] is an http.Handler for POST /run, GET / and POST /aggregate_metrics. One
// /run is one rollout: the row's task is run by a [Runner]
// ([github.com/agentic-opd/agenticopd.Env.RunOne]: the Env's own agent, sandbox,
// verification, reward and OPD), and the answer is NeMo Gym's verify-response shape:
// the row's keys echoed (minus the reserved result keys), responses_create_params as
// sent, a Responses-API response whose output holds the items the rollout produced,
// reward, and reward_components, the weighted parts of the reward whose plain sum is
// the reward (NeMo RL accepts no weighting: reward must equal the sum, rel 1e-5,
// abs 1e-6; a Runner whose parts do not sum fails the rollout with [ErrRewardSum]).
//
// The row names its task under "task" ({"id", "statement", "test_code",
// "hidden_tests", "cases": [{"input", "output"}], "difficulty", "language"}; see
// [TaskFields]) or by "task_id" among Config.Tasks. What the agent is never shown
// stays out of the echo: the answer's "task" has no "hidden_tests", "cases",
// "reference_solution" or other "hidden_" key (see [Result]), and neither have the
// lines [Writer] writes, so the tests that grade a rollout reach no trainer's result
// tables, logs or rollouts files. The prompt the agent sees is the
// Env's rendering of the task, exactly as on the Atropos path (so rewards and rows are
// the same); responses_create_params.input is echoed, not used. The row's temperature,
// top_p and max_output_tokens, which NeMo RL stamps into every row, are used for
// every model call (see [Sampling]). A row without a task, with
// responses_create_params missing or holding a key the Responses API does not have,
// or asking to stream is a bad row ([ErrBadRow]).
//
// Failures follow one of two drivers ([Failures]): NeMo RL classifies a /run by its
// HTTP status (5xx, 408, 429: infrastructure, retried; other 4xx: data), so the
// default [FailStatus] answers 500 for a rollout that could not be carried out (the
// model server failed, the sandbox or the verifier broke) and 422 for a bad row.
// NeMo Gym's standalone collector aborts its whole run on any non-2xx, so [FailRow]
// answers 200 with reward 0, _ng_failure_class ("rollout_failed", or "bad_row" with
// _ng_failure_terminal) and error, which the collector writes to its failures file
// and retries on resume. Config.RolloutTimeout, off by default as in NeMo Gym, bounds
// a rollout; one past it fails with class "timeout_exceeded" and
// _ng_failure_terminal, as NeMo Gym treats that class: resume does not run it again.
//
// The same /run can arrive twice (NeMo Gym's client re-sends a request whose
// connection dropped, forever): see [Server] for what happens then. A rollout whose
// every client went away is canceled, and its sandbox released.
//
// # Output items
//
// [Items] turns a trajectory into Responses items the way NeMo Gym's model server
// does for each model call: reasoning (when the model's reasoning was separated), a
// message (when it has text or nothing else), one function_call per tool call, the last
// item carrying the call's prompt_token_ids, generation_token_ids and
// generation_log_probs; then a function_call_output per tool result. Every call's
// prompt begins with every earlier prompt and generation (NeMo RL's contiguity rule),
// because the ids are the trajectory's own: the prompt of call k is the trajectory up
// to its first generated token.
//
// Teacher rows travel as an extension on the same last item of each model call (see
// [TeacherRows]):
//
//	"teacher_topk_token_ids": [[17, 4, 99], [], ...],
//	"teacher_topk_logprobs":  [[-0.1, -2.3, -4.0], [], ...]
//
// one row per entry of generation_token_ids, same order, the teacher's top-K ids
// ranked most likely first and their logprobs (floored at -9999, never NaN), and an
// empty row where the teacher was not asked (turns without a hint): never padding.
// They are the same rows the Atropos path puts in distill_token_ids /
// distill_logprobs at those positions. NeMo RL's GRPO reads the token fields and the
// reward; its GDPO estimator also reads reward_components (as reward/<name>); no
// NeMo RL trainer reads the teacher rows (its distillation computes its own top-K), so
// only a trainer written to read them uses them. They survive NeMo Gym's collector
// and its JSONL files because this server is the last hop that writes the items.
//
// # Inference through the trainer's model server
//
// Under NeMo Gym the policy is served by the trainer. [Policy] is a
// [github.com/agentic-opd/agenticopd/rollout.Policy] that generates through NeMo Gym's
// model server (POST /v1/chat/completions, training mode: return_token_id_information)
// and renders through the trainer's /tokenize. It replays every earlier call's token
// fields on its assistant message, unchanged, so that the trainer's server splices
// the next prompt onto them; it checks each answer (all three token fields, as many
// logprobs as ids, no NaN, a prompt that extends the earlier calls and equals the ids
// the agent holds) and fails the rollout on any breach ([ErrNonContiguous], counted
// by [Policy.NonContiguous]). Every sampling field is stated: temperature and top_p
// (the row's) at the top level, the engine's own fields (top_k, min_p,
// repetition_penalty) also in metadata.extra_body, which NeMo Gym's model server
// merges under the request (it drops top-level keys its chat parameters do not
// declare). One [Session] per rollout, carried in the context, holds the bundles and
// the model server's cookies (its endpoint affinity).
//
// When the row gives a rollout id (_ng_rollout_id, or _ng_task_index and
// _ng_rollout_index as NeMo Gym's collector sends them; "-a<n>" for a later attempt:
// [Row.RolloutID]), every model call of the rollout goes under NeMo Gym's per-rollout
// path prefix, ModelURL/ng-rollout/<id>/v1/chat/completions, which NeMo Gym's servers
// strip and its opt-in capture attributes the call by; a row without one (NeMo RL's)
// gets plain paths, and an _ng_rollout_id NeMo Gym would refuse is a bad row.
// PolicyConfig.NoRolloutPrefix turns the prefix off for a ModelURL that is not a NeMo
// Gym model server.
//
// A context overflow is a data failure. NeMo Gym's model server answers a prompt
// longer than the engine's max_model_len with an empty completion without token
// fields; the agent avoids it by bounding each call by the context the tokenizer
// reports, so one means the engine's context is shorter than its /tokenize says, and
// every attempt of the row would meet it again. NeMo RL's failures.py names such a
// prompt a data failure, and reads any 4xx but 408 and 429 as one, so the rollout is
// not scored (a rollout cut short by the server's configuration says nothing about the
// policy) but answered 422 with the reason under [FailStatus] (NeMo RL spends its
// small data budget on it, 2 attempts by default, and reports it, instead of
// retrying it 5 times as an infrastructure failure), and as a terminal failure row
// of class "context_overflow" under [FailRow] ([ErrContextOverflow],
// [Session.ContextOverflow]).
//
// Known limits: the reasoning a server's reasoning parser separates, and the
// tool calls a tool parser extracts, are put back as <think> and Hermes <tool_call>
// text for the agent's parser; run the trainer's vLLM without them where possible.
//
// # Offline
//
// [Writer] writes NeMo Gym's rollouts JSON Lines (one /run result per line with
// _ng_task_index and _ng_rollout_index); with
// [github.com/agentic-opd/agenticopd.NemoGymOnGroup] it takes the groups of
// Env.Process beside the Atropos JSONL.
package nemogym
