package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
)

// metricsRegistry holds what -metrics-addr serves: the Env's metrics
// (agenticopd.Env.Collector), the program's own gauges, the latency of sends to the
// trajectory API, and the Go runtime's and the process's metrics.
func metricsRegistry(env *agenticopd.Env, progress *cli.Progress, client *atropos.Client, sends *sendTimer) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(env.Collector(), sends.hist,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agenticopd_sandboxes_open",
			Help: "Sandboxes open now: one per rollout in flight, one more per rollout being verified.",
		}, func() float64 { return float64(progress.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agenticopd_spooled_groups",
			Help: "Groups on disk in the spool, not yet known to be taken by the trajectory API; a value that keeps growing means the API does not take them (check its log and the env's send_failures).",
		}, func() float64 {
			n, err := client.Spooled()
			if err != nil {
				return -1
			}
			return float64(n)
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// sendTimer is the trajectory API client's transport: it times each attempt to post
// groups (POST /scored_data and /scored_data_list), by outcome, in
// agenticopd_send_duration_seconds.
type sendTimer struct {
	next http.RoundTripper
	hist *prometheus.HistogramVec
}

// newSendTimer returns a sendTimer over next (http.DefaultTransport when nil).
func newSendTimer(next http.RoundTripper) *sendTimer {
	if next == nil {
		next = http.DefaultTransport
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agenticopd_send_duration_seconds",
		Help:    "Duration of each attempt to post groups to the trajectory API, by outcome (ok, error: a network error or a 5xx, retried; refused: a 4xx). Slow sends mean a loaded API or large groups.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"outcome"})
	for _, o := range []string{"ok", "error", "refused"} {
		h.WithLabelValues(o)
	}
	return &sendTimer{next: next, hist: h}
}

// RoundTrip implements http.RoundTripper.
func (s *sendTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasPrefix(req.URL.Path, "/scored_data") {
		return s.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := s.next.RoundTrip(req)
	outcome := "ok"
	switch {
	case err != nil || resp.StatusCode >= 500:
		outcome = "error"
	case resp.StatusCode >= 400:
		outcome = "refused"
	}
	s.hist.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	return resp, err
}
