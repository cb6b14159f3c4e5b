// Package report renders groups of rollouts as one self-contained HTML page: the
// inspector for OPD data. The page needs no network and loads no external asset (its
// Content-Security-Policy forbids both); open it from disk in any browser.
//
// What it shows, per group:
//
//   - a table of the rollouts: score and its breakdown, tokens, generated tokens,
//     and the rollout's [Figures] (scored positions, positions whose sampled token is
//     outside the teacher's top-K, the mean teacher-minus-student logprob over the
//     positions inside it), hints, and other facts (turns, stop);
//   - the group's metrics (the OPD metrics among them);
//   - per rollout, on demand, its tokens as text coloured by kind ([Kind]: prompt and
//     template, generated, tool result, hint), masked tokens muted, each hint as a
//     block where it was given, and at each scored position the teacher's logprob of
//     the sampled token minus the student's (Δ) as a heat colour (red: the teacher
//     finds the token less likely; blue: more likely), with the teacher's top-K, the
//     token text and both logprobs on hover.
//
// # Outside the teacher's top-K
//
// The teacher's rows hold its top-K at each scored position. Where the sampled token
// is not among them, the rows say only that the teacher's logprob of it is at most
// the row's lowest logprob. Such a position is never coloured or averaged as if that
// bound were the value: it has a colour of its own (dark stripes), its tooltip says
// "outside the teacher's top-K (rank > K), logprob ≤ x" (and the exact logprob when
// the source gave it, see [Sequence.TeacherLogprobs]), it is counted in the table's
// "outside top-K" column and left out of its mean Δ. Every tooltip says how many of
// the row's K entries it shows (Options.TopK keeps the first ones).
//
// The table's numbers come from [Sequence.Figures], which reads only the rows and the
// student's logprobs, so a group rendered from memory (the root package's
// Group.Report) and the same group read from JSON Lines ([FromScoredData],
// examples/inspect) show the same numbers. The exact rank of a token outside the
// top-K is not in the data (the rows stop at K), so the page says "rank > K".
//
// Token text comes from a [Detokenizer], the serving engine's own (*vllm.Client's
// /detokenize; the simulator has one too), one id per request and each id once per
// page. A token that is part of a multi-byte character decodes alone to U+FFFD, as it
// does in the engine.
//
// # Size
//
// The page stays usable for long rollouts: the data of a group is embedded as
// base64 little-endian arrays (ids as int32, logprobs as uint16 thousandths of a nat,
// so to 0.001, down to −65.5), decoded only when a rollout is opened, and tokens are
// rendered 2,000 at a time as they scroll into view. Each position keeps the first
// Options.TopK teacher entries ([DefaultTopK]), about 8 bytes each, and its row's
// entry count and lowest logprob (for the bound and "n of K shown"): 8 rollouts of
// 16k tokens, every position scored, make a page of about 16 MB (TestPageSize8x16k).
//
// # Streaming, and pages that are not complete
//
// A [Writer] writes each group as it is added, keeping only the token texts, so a
// long run's page costs no memory per group; [Write] is the one-call form. A page
// never looks complete when it is not: until [Writer.Close] its top says that it is
// incomplete (the page of a program killed mid-run keeps saying so, and its tokens
// show as ids), and [Writer.CloseWithError] closes the page of a run that failed with
// "The run failed", the reason and the number of groups it holds at its top. Groups
// from JSON Lines come in through [FromScoredData]; the root package's
// Group.Report gives the richer view of a group it collected (segments, hints, the
// score's breakdown).
package report
