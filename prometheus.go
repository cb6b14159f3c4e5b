package agenticopd

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
)

// promNamespace prefixes every metric name the collector exports.
const promNamespace = "agenticopd"

// Collector returns a [prometheus.Collector] of the Env's metrics, read at each scrape,
// for a registry of the caller's. Register it once per Env; it is safe for concurrent
// use.
//
// Every count of [Env.Metrics] is a counter named agenticopd_GROUP_NAME_total; a
// name with a third part is one series of a family labelled by reason, so
// env/dropped_groups/scores_equal is agenticopd_env_dropped_groups_total{reason="scores_equal"},
// and the family's own total (opd/unparsable_votes beside its reasons) is left to
// sum(). Every known series is exported from the start, at 0, so that alerts and
// rate() see it before the first event; a count added later (a new reason, a new
// name) is exported as soon as it exists, with a HELP text that names it. The
// lifetime means of [Env.Metrics] (train/mean_reward, opd/hint_rate, …) are not
// exported: their sums and counts are (histograms of the reward terms and of the
// repository tasks' test shares, counters of hints and rollouts), so a query divides
// them over any window, e.g.
// rate(agenticopd_train_reward_sum[10m]) / rate(agenticopd_train_reward_count[10m]);
// the reference's totals (opd/total_hints) are the counts of their own names
// (agenticopd_opd_hints_total). docs/metrics.md lists, for each name of
// [Env.Metrics], the series it is exported as.
// Histograms of request latency (agenticopd_request_duration_seconds, by role:
// render, generate, judge_chat, teacher_score) time each call the Env makes, and
// agenticopd_rollout_duration_seconds each rollout that ran, whatever its outcome.
func (e *Env) Collector() prometheus.Collector { return envCollector{e} }

type envCollector struct{ e *Env }

// Describe sends no descriptions: the collector is unchecked, since counts appear as
// a run meets new cases (a new drop or vote reason) and the registry cannot know them
// in advance.
func (envCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements [prometheus.Collector].
func (c envCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.e.promCounts()
	labelled := map[string]bool{}
	for name := range counts {
		if fam, _, ok := promSplit(name); ok {
			labelled[fam] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		fam, reason, hasReason := promSplit(name)
		if !hasReason && labelled[fam] {
			continue // the sum of the family's reasons
		}
		var labels []string
		var values []string
		if hasReason {
			labels, values = []string{"reason"}, []string{reason}
		}
		desc := prometheus.NewDesc(promName(fam), promHelp(fam), labels, nil)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, counts[name], values...)
	}
	c.e.metrics.hist.collect(ch)
	c.e.counts.latency().collect(ch)
}

// promName is the Prometheus name of a counter of [Env.Metrics] (without its reason,
// if any: "env/dropped_groups"): agenticopd_, the name with "/" and other characters
// Prometheus does not allow as "_", and _total.
func promName(name string) string {
	return promNamespace + "_" + strings.Trim(promInvalid.ReplaceAllString(name, "_"), "_") + "_total"
}

var promInvalid = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// promSplit splits a count's name into its family and its reason: "a/b/c" is family
// "a/b", reason "c" (ok true); a name of one or two parts is its own family.
func promSplit(name string) (family, reason string, ok bool) {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 3 {
		return name, "", false
	}
	return parts[0] + "/" + parts[1], parts[2], true
}

// promCounts returns the counts to export: every known one (at 0 until it happens)
// and every count of [Env.Metrics], without the means, with the reference's "total_"
// names under the names of their own counts.
func (e *Env) promCounts() map[string]float64 {
	out := map[string]float64{}
	for name := range promHelps() {
		if !promFamilies()[name] {
			out[name] = 0
		}
	}
	for _, name := range promKnownReasons() {
		out[name] = 0
	}
	for name, v := range e.Metrics() {
		if promIsMean(name) {
			continue
		}
		out[name] = v
	}
	a := e.metrics
	a.mu.Lock()
	out["train/rollouts"] = float64(a.train.n)
	out["train/passed_rollouts"] = float64(a.train.passed)
	out["swe/rollouts"] = float64(a.train.swe.n)
	out["swe/resolved_rollouts"] = float64(a.train.swe.resolved)
	out["opd/rollouts"] = float64(a.opd.Rollouts)
	out["opd/rollouts_with_hint"] = float64(a.opd.RolloutsWithHint)
	out["opd/hints"] = float64(a.opd.Hints)
	out["opd/scored_turns"] = float64(a.opd.ScoredTurns)
	a.mu.Unlock()
	return out
}

// promIsMean reports whether a metric of [Env.Metrics] is a lifetime mean or rate, or
// a reference total that promCounts exports under another name.
func promIsMean(name string) bool {
	last := name[strings.LastIndexByte(name, '/')+1:]
	return strings.HasPrefix(last, "mean_") || strings.HasSuffix(last, "_rate") || strings.HasPrefix(last, "total_")
}

// promFamilies are the families labelled by reason.
func promFamilies() map[string]bool {
	return map[string]bool{"env/dropped_groups": true, "opd/unparsable_votes": true}
}

// promKnownReasons are the series of the labelled families exported from the start.
func promKnownReasons() []string {
	return []string{
		"env/dropped_groups/" + DropScoresEqual, "env/dropped_groups/" + DropTooLong,
		"env/dropped_groups/prompt_too_long",
		"opd/unparsable_votes/" + judge.UnparsedNoDecision, "opd/unparsable_votes/" + judge.UnparsedBadDecision,
		"opd/unparsable_votes/" + judge.UnparsedRequestFailed, "opd/unparsable_votes/" + judge.UnparsedMissingChoice,
		"opd/unparsable_votes/" + judge.UnparsedEmptyContent, "opd/unparsable_votes/" + judge.UnparsedTruncated,
		"opd/unparsable_votes/" + judge.UnparsedUnfinished, "opd/unparsable_votes/" + judge.UnparsedOnlyThinking,
		"opd/unparsable_votes/" + judge.UnparsedConflictingDecisions, "opd/unparsable_votes/" + judge.UnparsedUnknownFinish,
	}
}

// promHelp is the HELP text of a family: what it counts and what to do when it
// grows. A count this table does not know gets a text that names it.
func promHelp(family string) string {
	if h, ok := promHelps()[family]; ok {
		return h
	}
	return "Count of " + family + " (see the agenticopd package doc for what it counts)."
}

func promHelps() map[string]string {
	h := map[string]string{
		"requests/render":        "Render (/tokenize) requests to the policy server.",
		"requests/generate":      "Generation (/v1/completions) requests to the policy server: one per agent turn.",
		"requests/teacher_score": "Scoring requests to the teacher server (prompt logprobs of hinted sequences).",
		"requests/judge_chat":    "Chat requests to the judge model (one per judged turn, more when the server ignores n).",

		"env/groups": "Groups collected (kept or dropped).",
		"env/sandbox_failures": "Rollouts that failed because a sandbox could not be made or the verification could not run; " +
			"check the host (bubblewrap, disk, cgroups) when it grows.",
		"env/policy_failures":         "Rollouts that failed because the policy server failed; check the vLLM server's health and logs.",
		"env/failed_groups":           "Groups that failed to collect and were skipped (the log says why).",
		"env/dropped_groups":          "Groups dropped before OPD, by reason: scores_equal (every rollout scored the same: tasks too easy or too hard, or without tests), too_long (a sequence reached the trainer's max token length), prompt_too_long (the prompt leaves no room for a turn).",
		"env/groups_sent":             "Groups handed to the trajectory API (sent, or in the spool until the API takes them).",
		"env/send_failures":           "Sends that gave up or were refused; the group stays in the spool (or the dead-letter file for a 4xx). Check the trajectory API.",
		"env/cancelled_groups":        "Groups cut short by shutdown; not failures.",
		"env/api_resets":              "Times the trajectory API lost this env's registration (restart or /reset_data) and the env registered again.",
		"env/groups_resent_on_reset":  "Groups the lost API had accepted but not served, sent again after a reset (the trainer may see them twice).",
		"env/groups_abandoned":        "Groups kept in the dead-letter file instead of being posted again: the API may hold as many copies as the client's MaxCopies allows (the trainer may have them).",
		"judge/truncated_votes":       "Judge answers cut at the judge's max tokens (finish_reason length), never read as votes; raise Config.JudgeMaxTokens or turn the judge's thinking off.",
		"env/solution_sandbox_faults": "Rollouts whose solution broke its own sandbox (filled its memory or workspace, locked it), scored as the solution's fault (correctness 0.1) with the group kept; a steady rate is a policy learning to break its sandbox.",
		"judge/empty_content":         "Judge answers with empty content (a thinking judge that spent its tokens behind a reasoning parser); raise the judge's max tokens or turn thinking off.",

		"opd/turn_pairs":            "Turn pairs (an assistant turn and what followed it) found in kept groups.",
		"opd/no_span_pairs":         "Turn pairs without a generated span to score; not judged.",
		"opd/judge_calls":           "Judge calls made for turn pairs.",
		"opd/judge_errors":          "Judge calls that failed; their turns got no hint. Check the judge server.",
		"opd/judge_votes":           "Judge votes read.",
		"opd/unparsable_votes":      "Judge votes that gave no decision, by reason; a high share means the judge model does not follow the \\boxed{} format.",
		"opd/alignment_mismatches":  "Hinted turns left unscored because the teacher sequence did not align with the student's tokens by id.",
		"opd/template_drift":        "Hinted turns left unscored because the hint could not be rendered exactly with the chat template.",
		"opd/teacher_too_long":      "Hinted turns left unscored because the teacher sequence would pass the teacher's max length.",
		"opd/teacher_requests":      "Teacher scoring calls made by OPD.",
		"opd/teacher_sequences":     "Sequences sent to the teacher.",
		"opd/teacher_prompt_tokens": "Tokens sent to the teacher (its prefill load).",
		"opd/teacher_positions":     "Positions that got teacher top-K rows.",
		"opd/rollouts":              "Rollouts with at least one turn pair (the denominator of the reference's opd/ means).",
		"opd/rollouts_with_hint":    "Rollouts with at least one hint; divide by agenticopd_opd_rollouts_total for the hint rate.",
		"opd/hints":                 "Hints given by the judge; divide by agenticopd_opd_rollouts_total for hints per rollout.",
		"opd/scored_turns":          "Turns that got teacher rows; divide by agenticopd_opd_rollouts_total for turns scored per rollout.",

		"train/rollouts":        "Training rollouts scored (dropped groups included, as the reference counts them).",
		"train/passed_rollouts": "Training rollouts that passed (correctness at least 0.8); divide by agenticopd_train_rollouts_total for the pass rate.",

		"swe/rollouts":          "Training rollouts of repository tasks graded by their hidden tests.",
		"swe/resolved_rollouts": "Repository-task rollouts resolved (every FAIL_TO_PASS and PASS_TO_PASS test passed); divide by agenticopd_swe_rollouts_total for the resolved rate.",
		"swe/test_file_edits":   "Test files whose edits grading discarded from repository-task rollouts (the agent edited a test or planted a conftest.py); a rising count means the policy is learning to touch tests.",
	}
	for name := range (rollout.Stats{}).Metrics() {
		h[name] = "Agent loop count " + name + " (see rollout.Stats); template drift and echo mismatches mean the server's template or tokenizer changed under the run."
	}
	rs := map[string]string{
		"rollout/rollouts":             "Agent loops run (training and eval).",
		"rollout/tool_calls":           "Tool calls made by agents, valid or not.",
		"rollout/invalid_tool_calls":   "Tool calls that could not be parsed; a high share means the model's tool-call format does not match the parser.",
		"rollout/unknown_tool_calls":   "Calls of tools that do not exist.",
		"rollout/truncated_turns":      "Turns cut at max tokens; raise Config.MaxTokens if it grows.",
		"rollout/template_drift":       "Token deltas that failed their prefix check (the episode ends); the server's chat template does not extend earlier turns exactly.",
		"rollout/prompt_echo_mismatch": "Generations whose echoed prompt differed from the ids sent; the server changed the prompt (a BOS added?).",
		"rollout/alt_close":            "Turns that stopped on an end-of-turn id other than the template's close.",
		"rollout/synth_close":          "Close tokens the agent added after a truncated turn.",
	}
	maps.Copy(h, rs)
	for name := range (opd.Metrics{}).Map() {
		if _, ok := h[name]; !ok && !promIsMean(name) {
			h[name] = "OPD count " + name + " (see opd.Metrics)."
		}
	}
	return h
}

// rewardHistograms are the distributions of the training rollouts' reward terms; their
// sums and counts give means over any window.
type rewardHistograms struct {
	reward, correctness, efficiency, toolUsage prometheus.Histogram
	// f2p and p2p are the shares of a graded repository rollout's FAIL_TO_PASS and
	// PASS_TO_PASS tests that passed (swe/f2p_rate and swe/p2p_rate as window means).
	f2p, p2p prometheus.Histogram
}

func newRewardHistograms() *rewardHistograms {
	h := func(name, help string) prometheus.Histogram {
		sub := "train"
		if strings.HasPrefix(name, "swe/") {
			sub, name = "swe", strings.TrimPrefix(name, "swe/")
		}
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: promNamespace, Subsystem: sub, Name: name, Help: help,
			Buckets: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}, // tenths, written out: LinearBuckets adds float noise to the labels
		})
	}
	return &rewardHistograms{
		reward:      h("reward", "Reward of each training rollout (0 to 1); _sum/_count over a window is the mean reward."),
		correctness: h("correctness", "Correctness term of each training rollout (0 to 1; see package reward); a window mean near 0 or 1 means the tasks are too hard or too easy."),
		efficiency:  h("efficiency", "Efficiency term of each training rollout's reward (fewer turns is higher)."),
		toolUsage:   h("tool_usage", "Tool-use term of each training rollout's reward."),
		f2p: h("swe/f2p_rate", "Share of a graded repository-task rollout's FAIL_TO_PASS tests that passed (0 to 1); "+
			"_sum/_count over a window is swe/f2p_rate, how often the policy fixes what the task asks."),
		p2p: h("swe/p2p_rate", "Share of a graded repository-task rollout's PASS_TO_PASS tests that passed (0 to 1); "+
			"_sum/_count over a window is swe/p2p_rate: below 1, the policy's patches break what worked."),
	}
}

func (h *rewardHistograms) observe(rs []Rollout) {
	for _, r := range rs {
		h.reward.Observe(r.Reward.Reward)
		h.correctness.Observe(r.Reward.Correctness)
		h.efficiency.Observe(r.Reward.Efficiency)
		h.toolUsage.Observe(r.Reward.ToolUsage)
		if res := r.Verification.Repo; res != nil {
			h.f2p.Observe(res.F2PRate)
			h.p2p.Observe(res.P2PRate)
		}
	}
}

func (h *rewardHistograms) collect(ch chan<- prometheus.Metric) {
	for _, x := range []prometheus.Histogram{h.reward, h.correctness, h.efficiency, h.toolUsage, h.f2p, h.p2p} {
		x.Collect(ch)
	}
}

// latencies times the Env's requests by role, and whole rollouts.
type latencies struct {
	vec     *prometheus.HistogramVec
	rollout prometheus.Histogram
}

func newLatencies() *latencies {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: promNamespace, Name: "request_duration_seconds",
		Help: "Duration of the Env's requests, by role: render and generate (policy), judge_chat, teacher_score. " +
			"A slow generate is the policy server's load; a slow teacher_score its prefill (lower DistillTopK or MaxTeacherRequests).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25, 50, 100, 250, 600},
	}, []string{"role"})
	for _, r := range []string{"render", "generate", "judge_chat", "teacher_score"} {
		vec.WithLabelValues(r) // present from the start
	}
	rollout := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: promNamespace, Name: "rollout_duration_seconds",
		Help: "Wall time of each rollout, from its sandbox slot to its reward (the agent's turns, its tools and the verification). " +
			"Long rollouts with short generate times are the sandbox's: the host's CPU or Config.VerifyTimeout.",
		Buckets: []float64{.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500},
	})
	return &latencies{vec: vec, rollout: rollout}
}

// rolloutSince observes a rollout that started at start.
func (l *latencies) rolloutSince(start time.Time) { l.rollout.Observe(time.Since(start).Seconds()) }

func (l *latencies) since(role string, start time.Time) {
	l.vec.WithLabelValues(role).Observe(time.Since(start).Seconds())
}

func (l *latencies) collect(ch chan<- prometheus.Metric) {
	l.vec.Collect(ch)
	l.rollout.Collect(ch)
}

// latency returns c's request histograms, made on first use (a requestCounts is used
// as a zero value).
func (c *requestCounts) latency() *latencies {
	c.latOnce.Do(func() { c.lat = newLatencies() })
	return c.lat
}
