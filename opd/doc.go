// Package opd turns token-exact rollouts into on-policy distillation rows with
// hindsight hints, as the reference environment does, with its flaws fixed.
//
// For a group of [rollout.Trajectory] values, a [Distiller]:
//
//  1. finds the turn pairs ([TrajectoryPairs]): each assistant turn, including one that
//     only calls tools, with the tool results (and optional user message) that
//     followed it;
//  2. asks a [judge.Judge] about every pair, Concurrency at a time; the judge sees the
//     assistant's text and tool calls and the next state;
//  3. builds teacher sequences from the student's own token ids plus hint tokens, per
//     [Placement]: [Inline] (the default) inserts each hint as a user message right
//     before its turn's generation prompt and scores every hinted turn of a rollout in
//     one sequence; [TaskPrompt] reproduces the reference's placement ([AppendHint]),
//     one sequence per hinted turn;
//  4. checks the alignment: with Inline, a hint is inserted only where the trajectory
//     records the turn's generation prompt ([rollout.SegGenPrompt] spanning exactly
//     [Turn.GenPromptStart, Turn.Start)); every scored teacher position must hold the
//     student's token at the mapped student position, and that position must be a
//     sampled token of the trajectory; a turn that fails is counted and left unscored,
//     never shifted;
//  5. sends all teacher sequences of the group in one [scorer.LogprobScorer] Score call
//     (the scorer splits it by server limits) with K = TopK;
//  6. places the teacher's ranked top-K rows and the teacher logprob of each sampled
//     token at the student positions ([Rows]).
//
// The scored span of a turn is its whole generated span, [Turn.Start, Turn.End) of
// [rollout.Turn]: text, tool-call text and the end-of-turn token. Positions that were
// not scored have empty rows; [Rows.Dense] gives Atropos's [position][k] layout with
// [] there, and [Rows.ZeroPadded] the reference's fixed L×K layout with zeros.
//
// # Compared with the reference
//
// The reference skipped tool-call-only turns, hid the tool calls from the judge,
// re-tokenised the assistant text and searched for it in the student's ids, scored
// only the prose (never the tool-call text or the end-of-turn token), put every hint
// in the first user message, and sent one teacher request per hinted turn, each
// re-reading the whole conversation. Here the spans come from the trajectory, the ids
// are never re-tokenised, every position is checked by id, and with Inline one
// teacher sequence per rollout costs O(L) prefill instead of O(P·L).
//
// # Errors
//
// Judge failures never fail a group: the turn gets no hint and the failure is counted.
// Template drift on a hint ([rollout.ErrTemplateDrift]) leaves the turn unscored and
// is counted. A teacher error, or any other Templater or Renderer error, fails the
// call; the caller decides whether to retry or drop the group.
//
// # Metrics
//
// [Metrics.Map] gives the reference's names (opd/mean_hints_per_rollout,
// opd/mean_turns_scored, opd/hint_rate, opd/total_hints, opd/total_scored_turns) and
// this library's counts (judge calls and votes, unparsable votes by reason, alignment
// mismatches, template drift, teacher requests, sequences, prompt tokens and
// positions).
package opd
