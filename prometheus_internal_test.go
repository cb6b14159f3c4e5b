package agenticopd

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectorExportsCountsItHasNeverSeen counts names the collector's tables do not
// know, as other parts of the library add them (a new judge count, a new drop reason,
// a new family with reasons): each is exported without an edit here, named and
// labelled by the rule, with a HELP text, and the scrape stays lint-clean.
func TestCollectorExportsCountsItHasNeverSeen(t *testing.T) {
	e := &Env{metrics: newAccumulator(), counts: &requestCounts{}}
	for name, v := range map[string]float64{
		"judge/a_new_count":                  2,
		"env/dropped_groups/prompt_too_long": 1,
		"env/dropped_groups/a_new_reason":    4,
		"verify/faults/oom":                  3,
		"verify/faults":                      3, // a family's total beside its reasons: left to sum()
		"opd/unparsable_votes/truncated":     5,
	} {
		e.metrics.count(name, v)
	}
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e.Collector()))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	text := rec.Body.String()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)

	for _, want := range []string{
		"# HELP agenticopd_judge_a_new_count_total Count of judge/a_new_count (see the agenticopd package doc for what it counts).",
		"agenticopd_judge_a_new_count_total 2",
		`agenticopd_env_dropped_groups_total{reason="a_new_reason"} 4`,
		`agenticopd_env_dropped_groups_total{reason="prompt_too_long"} 1`,
		`agenticopd_verify_faults_total{reason="oom"} 3`,
		`agenticopd_opd_unparsable_votes_total{reason="truncated"} 5`,
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "agenticopd_verify_faults_total 3", "a family's total is left to sum()")
}

func TestPromName(t *testing.T) {
	for name, want := range map[string]string{
		"env/dropped_groups":  "agenticopd_env_dropped_groups_total",
		"judge/a_new_count":   "agenticopd_judge_a_new_count_total",
		"requests/judge_chat": "agenticopd_requests_judge_chat_total",
		"odd-name.x":          "agenticopd_odd_name_x_total",
	} {
		assert.Equal(t, want, promName(name), name)
	}
}
