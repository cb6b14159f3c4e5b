package agenticopd_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// scrape serves reg over loopback HTTP, as a Prometheus server would read it, and
// returns the text; every problem promlint finds in it fails the test.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
	return string(body)
}

func TestCollectorIsWhatPrometheusUsersExpect(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("prom")))
	// Tasks without tests: every group is dropped for equal scores.
	env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) { c.KeepEqualScores = false })
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(env.Collector()))

	before := scrape(t, reg)
	for name, want := range map[string]string{
		"a reason is a label, present at 0":       `agenticopd_env_dropped_groups_total{reason="scores_equal"} 0`,
		"every known reason from the start":       `agenticopd_env_dropped_groups_total{reason="too_long"} 0`,
		"a count before its first event":          "agenticopd_env_send_failures_total 0",
		"a vote reason":                           `agenticopd_opd_unparsable_votes_total{reason="no_decision"} 0`,
		"sums and counts a query divides":         "agenticopd_train_reward_count 0",
		"the pass rate's numerator":               "agenticopd_train_passed_rollouts_total 0",
		"a latency histogram by role":             `agenticopd_request_duration_seconds_count{role="teacher_score"} 0`,
		"a rollout latency histogram":             "agenticopd_rollout_duration_seconds_count 0",
		"cut judge answers":                       "agenticopd_judge_truncated_votes_total 0",
		"a rollout that broke its sandbox":        "agenticopd_env_solution_sandbox_faults_total 0",
		"a judge's thinking-only answer":          `agenticopd_opd_unparsable_votes_total{reason="only_thinking"} 0`,
		"a judge answer of unknown end":           `agenticopd_opd_unparsable_votes_total{reason="unknown_finish"} 0`,
		"HELP a person can act on":                "# HELP agenticopd_env_policy_failures_total Rollouts that failed because the policy server failed; check",
		"a family's total is left to sum()":       "# TYPE agenticopd_opd_unparsable_votes_total counter",
		"the reference's hint total, as a count":  "agenticopd_opd_hints_total 0",
		"rollout counts":                          "agenticopd_rollout_invalid_tool_calls_total 0",
		"requests by role":                        "agenticopd_requests_generate_total 0",
		"the reference's hint rate, as two sides": "agenticopd_opd_rollouts_with_hint_total 0",
	} {
		assert.Contains(t, before, want, name)
	}
	for name, bad := range map[string]*regexp.Regexp{
		"no reason in a name":        regexp.MustCompile(`(?m)^agenticopd_env_dropped_groups_scores_equal`),
		"no lifetime mean":           regexp.MustCompile(`(?m)^agenticopd_\w*mean`),
		"no placeholder HELP":        regexp.MustCompile(`# HELP \S+ agenticopd metric`),
		"no unlabelled family total": regexp.MustCompile(`(?m)^agenticopd_opd_unparsable_votes_total \d`),
	} {
		assert.NotRegexp(t, bad, before, name)
	}

	task, err := taskStream().Next(context.Background())
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), task)
	require.NoError(t, err)
	require.Equal(t, agenticopd.DropScoresEqual, g.Dropped)

	after := scrape(t, reg)
	assert.Contains(t, after, `agenticopd_env_dropped_groups_total{reason="scores_equal"} 1`)
	assert.Contains(t, after, "agenticopd_train_reward_count 2", "one observation per rollout of the group")
	assert.Contains(t, after, "agenticopd_train_rollouts_total 2")
	assert.Regexp(t, `agenticopd_request_duration_seconds_count\{role="generate"\} [1-9]`, after)
	assert.Contains(t, after, "agenticopd_rollout_duration_seconds_count 2", "one observation per rollout")
	assert.Contains(t, after, `agenticopd_env_dropped_groups_total{reason="too_long"} 0`, "other reasons stay at 0")
}
