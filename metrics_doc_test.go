package agenticopd

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryDocumentedMetricIsExported reads docs/metrics.md: every name of its first
// table is exported under the rule it states (agenticopd_GROUP_NAME_total, a third
// part as the label reason), unless its second table gives the series it is exported
// as instead; each of those series is in a scrape of a new Env, and a name it says is
// not exported is not.
func TestEveryDocumentedMetricIsExported(t *testing.T) {
	doc, err := os.ReadFile("docs/metrics.md")
	require.NoError(t, err)
	counts, other, ok := strings.Cut(string(doc), "## Exported under other names")
	require.True(t, ok, "docs/metrics.md has no table of names exported otherwise")

	e := &Env{metrics: newAccumulator(), counts: &requestCounts{}}
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e.Collector()))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	scrape := rec.Body.String()
	has := func(series string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + `[{ ]`).MatchString(scrape)
	}

	elsewhere := map[string]bool{}
	checked := 0
	for _, row := range tableRows(other) {
		names, exported := backticked(row[0]), backticked(row[1])
		for _, name := range names {
			elsewhere[name] = true
			checked++
			if strings.HasPrefix(row[1], "not exported") {
				assert.False(t, has(promName(name)), "%s is documented as not exported", name)
				continue
			}
			require.NotEmpty(t, exported, "row of %s names no series", name)
			for _, s := range exported {
				assert.True(t, has(s), "%s: documented as %s, which a scrape does not have", name, s)
			}
		}
	}
	for _, row := range tableRows(counts) {
		for _, name := range backticked(row[0]) {
			if elsewhere[name] {
				continue
			}
			checked++
			fam, reason, labelled := promSplit(name)
			if !labelled {
				assert.True(t, has(promName(name)), "%s: documented as %s, which a scrape does not have", name, promName(name))
				continue
			}
			reasons := []string{reason}
			if reason == "REASON" { // the row names the reasons in its text
				reasons = nil
				for _, r := range backticked(row[1]) {
					if !strings.Contains(r, "/") {
						reasons = append(reasons, r)
					}
				}
				require.NotEmpty(t, reasons, "row of %s names no reason", name)
			}
			for _, r := range reasons {
				s := promName(fam) + `{reason="` + r + `"}`
				assert.Contains(t, scrape, s+" ", "%s/%s: documented as %s", fam, r, s)
			}
		}
	}
	require.Greater(t, checked, 50, "the tables were read")
}

// tableRows returns the cells of the Markdown table rows in s, header and rule left out.
func tableRows(s string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| name") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) >= 2 {
			rows = append(rows, cells)
		}
	}
	return rows
}

var backtickRE = regexp.MustCompile("`([^`]+)`")

// backticked returns the code spans of s that name a metric or a series (no spaces).
func backticked(s string) []string {
	var out []string
	for _, m := range backtickRE.FindAllStringSubmatch(s, -1) {
		if !strings.ContainsAny(m[1], " (") {
			out = append(out, m[1])
		}
	}
	return out
}
