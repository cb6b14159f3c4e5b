// Package agenticopd turns agentic coding rollouts into on-policy distillation (OPD)
// training data: for trainers behind the Atropos trajectory API, for NeMo RL through
// NeMo Gym, or for a program of the caller's own.
//
// An [Env] runs, for each task, GroupSize agents in parallel, each in its own sandbox,
// talking to a vLLM server with exact token ids ([rollout.Agent]). When an agent stops,
// the env runs the task's own tests, visible and hidden, in a fresh sandbox of the same
// factory, talking to the agent's solution.py in the rollout's sandbox over a pipe
// ([reward.Verify]): the agent's code never runs in the test process, never sees the
// tests, and its own test files never decide the reward. Each rollout
// is scored 0.7·correctness + 0.15·efficiency + 0.15·tool use ([reward.Default]). A
// judge then looks at every assistant turn and the state that followed it and, where
// that state shows how the turn could have been better, gives a short hint
// ([judge.LLM]); a teacher scores the student's exact tokens with the hint in context
// ([opd.Distiller]); and the teacher's top-K per position becomes distill_token_ids /
// distill_logprobs on an [atropos.ScoredDataGroup].
//
// Groups go to the Atropos trajectory API ([Env.Serve]), to a JSON Lines file
// ([Env.Process]), or back to the caller ([Env.CollectGroup]). [Env.Evaluate] runs the
// eval split greedily, without OPD.
//
// # Wiring
//
// Only [Config.Policy] is required. With a *vllm.Client (or *vllm.Pool) as the policy,
// the same server is the teacher and the judge's model, as in the original
// environment; a frozen teacher or another judge server is one field away. The sandbox
// is bubblewrap ([github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap]); it is created
// and probed on first use, and its error says how to install bubblewrap. Every role is
// an interface, so users swap in their own judge, teacher, sandbox, reward or task
// source.
//
// # Decisions
//
//   - A rollout never vetoes its group. Whatever the agent's own actions can cause is
//     scored as the solution's fault ([reward.RuleSolutionFault], correctness 0.1):
//     a solution that fills its sandbox's memory (the OOM killer then takes
//     bubblewrap or the interpreter), fills its workspace (the storage quota kills
//     the solution before its first message), or locks its workspace (chmod 000).
//     The group is kept, the other rollouts are scored as usual, and the rollout is
//     counted in env/solution_sandbox_faults. Before verification the workspace is
//     restored ([rollout.Restorer]: what the agent locked is given back, so a
//     locked workspace scores as usual); /tmp, /dev/shm and the agent's processes
//     end with each command anyway. Otherwise a policy would learn to erase the
//     groups it would lose.
//   - Only a failure no agent action can cause (bubblewrap missing, the sandbox or
//     the verifier's fresh sandbox not made, the host's disk, the policy server, a
//     bug) fails the whole group with [ErrRolloutFailed]: the verifier tells the two
//     apart by sandbox (the agent acts in its own only) and by a control run in a
//     fresh sandbox (see package reward). Atropos wants GroupSize sequences, and an
//     infrastructure failure is not the student's behaviour: training on it as a low
//     score would teach the wrong thing. A rollout that ran and did badly is of
//     course kept.
//   - A rollout whose prompt leaves the policy's context no room to generate gets no
//     turn; the original does not score it. Its group is dropped ([DropPromptTooLong],
//     env/dropped_groups/prompt_too_long) in every mode (Process skips it too), never
//     sent or written, and stays out of train/*. Each such task is logged once per
//     Env, at warn level, naming it; later groups of it are only counted.
//   - Groups a sink would drop anyway (all scores equal, the default of Atropos's
//     ensure_scores_are_not_same; or a sequence at least the trainer's max token
//     length) are marked [Group.Dropped] before any judge or teacher request.
//     Process keeps equal-score groups and applies no length limit, as Atropos's
//     process mode does.
//   - Judge failures never fail a group: the turn gets no hint and the failure is
//     counted. A teacher failure fails the group, since its rows would be missing.
//     Inline hints make a teacher sequence longer than the student's; a hinted turn
//     that would pass the teacher's context ([Config.TeacherMaxLen], by default the
//     policy server's max_model_len − 1) is left unscored and counted
//     (opd/teacher_too_long) instead of failing the group's teacher request.
//   - Distill rows are empty ([]) wherever the teacher was not asked; they are never
//     zero-padded unless a consumer asks for that layout
//     ([atropos.EncodeOptions.DenseZeroPad]).
//   - The reference's opd_enabled is [Config.DisableOPD]: inverted so that the zero
//     value keeps OPD on. A zero Temperature means the default 1.0; Evaluate decodes
//     greedily.
//
// # Metrics
//
// [Group.Metrics] (one group) and [Env.Metrics] (everything since NewEnv) carry the
// original environment's names: train/mean_reward, train/mean_correctness,
// train/mean_efficiency, train/mean_tool_usage, train/pass_rate (correctness ≥ 0.8),
// train/total_rollouts over every collected rollout, dropped groups included, as the
// original counts them (except groups dropped as [DropPromptTooLong], whose rollouts
// got no turn and are not scored); opd/mean_hints_per_rollout, opd/mean_turns_scored and
// opd/hint_rate over the rollouts with at least one turn pair, opd/total_hints,
// opd/total_scored_turns. Evaluate returns eval/mean_correctness, eval/mean_reward,
// eval/pass_rate and eval/n_items; eval rollouts stay out of train/.
//
// This library's own: opd/teacher_prompt_tokens, opd/alignment_mismatches,
// opd/template_drift, opd/teacher_too_long, opd/unparsable_votes and the other counts
// of [opd.Metrics]; rollout/template_drift and the other token-boundary counts of
// [rollout.Stats]; and in [Env.Metrics] only, requests/ per role (render, generate,
// teacher_score, judge_chat), env/groups (collected), env/sandbox_failures,
// env/policy_failures, env/solution_sandbox_faults (rollouts whose own sandbox could
// not run their solution, scored as its fault), env/failed_groups,
// env/dropped_groups/REASON, env/groups_sent,
// env/send_failures, env/cancelled_groups (cut short by the caller's ctx; not failures),
// env/api_resets (times the trajectory API lost the env's registration and Serve
// registered again), env/groups_resent_on_reset (groups the lost API had accepted, not
// known to be served, sent again), env/groups_abandoned (groups kept in the
// dead-letter file rather than posted once more than atropos.ClientConfig.MaxCopies
// allows), judge/empty_content (judge choices with an empty
// content, as a thinking judge behind a reasoning parser answers; never read as votes)
// and judge/truncated_votes (judge choices cut at max_tokens, whatever their content;
// never read as votes).
//
// # Sampling
//
// Every policy, judge and teacher request states every sampling field (temperature,
// top_p, top_k, min_p, the repetition, presence and frequency penalties, max_tokens), so
// a server's --generation-config defaults never decide; each group's generation_params
// records the policy's. Settings under which vLLM's reported logprobs are not those of
// the sampled distribution (a Temperature other than 1, any truncation or penalty) are
// refused by NewEnv unless [Config.AllowLogprobMismatch] is set.
package agenticopd
