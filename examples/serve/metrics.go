package main

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// envCollector exports an Env's metrics (read at each scrape) under Prometheus names:
// see promName.
type envCollector struct {
	metrics func() map[string]float64
	extra   func() map[string]float64 // gauges of the program itself
}

// Describe sends no descriptions: the set of metrics grows as the run meets new
// cases (dropped-group reasons, unparsable-vote reasons), so the collector is
// unchecked.
func (c envCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c envCollector) Collect(ch chan<- prometheus.Metric) {
	emit := func(m map[string]float64) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			prom, kind := promName(name)
			desc := prometheus.NewDesc(prom, "agenticopd metric "+name, nil, nil)
			ch <- prometheus.MustNewConstMetric(desc, kind, m[name])
		}
	}
	emit(c.metrics())
	if c.extra != nil {
		emit(c.extra())
	}
}

var invalidChars = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// promName maps a metric name of the library (the reference's "train/mean_reward",
// "opd/total_hints", "requests/generate", …) to a Prometheus name and type, after the
// Prometheus naming conventions: the prefix agenticopd_, "/" and other invalid
// characters as "_", and for cumulative counts a counter with the suffix _total (a
// leading "total_" moves there: opd/total_hints is agenticopd_opd_hints_total). Means,
// rates and the program's own gauges (name starting with "gauge/") are gauges.
func promName(name string) (string, prometheus.ValueType) {
	kind := prometheus.CounterValue
	if strings.HasPrefix(name, "gauge/") {
		name, kind = strings.TrimPrefix(name, "gauge/"), prometheus.GaugeValue
	}
	parts := strings.Split(name, "/")
	last := parts[len(parts)-1]
	if strings.HasPrefix(last, "mean_") || strings.HasSuffix(last, "_rate") {
		kind = prometheus.GaugeValue
	}
	if kind == prometheus.CounterValue {
		parts[len(parts)-1] = strings.TrimPrefix(last, "total_")
	}
	out := "agenticopd_" + strings.Trim(invalidChars.ReplaceAllString(strings.Join(parts, "_"), "_"), "_")
	if kind == prometheus.CounterValue {
		out += "_total"
	}
	return out, kind
}

// metricsHandler serves the collector's metrics, with the Go runtime's and the
// process's, in the Prometheus text format.
func metricsHandler(c envCollector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
