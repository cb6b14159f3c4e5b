package kube_test

import (
	"context"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// TestSPDYFallback: where the server refuses the WebSocket upgrade, the same exec
// is tried over SPDY (the fake serves no SPDY, so the call then fails as an error,
// never as a command's result).
func TestSPDYFallback(t *testing.T) {
	sb, c := newSandbox(t, nil)
	c.RefuseWebSocket(true)
	before := c.SPDY.Load()
	_, err := sb.Run(t.Context(), rollout.Command{Shell: "true"})
	if err == nil {
		t.Fatal("Run succeeded with no exec transport")
	}
	if c.SPDY.Load() == before {
		t.Errorf("no SPDY attempt after the WebSocket refusal: %v", err)
	}
	c.RefuseWebSocket(false)
	if res, err := sb.Run(t.Context(), rollout.Command{Shell: "true"}); err != nil || res.ExitCode != 0 {
		t.Errorf("Run after the refusal ended = %+v, %v", res, err)
	}
}

// BenchmarkExecFake measures one Run over the fake cluster's loopback TLS exec
// endpoint with the real helper: latency p50 and this process's CPU per exec
// (client and fake server together; the helper subprocess not counted).
func BenchmarkExecFake(b *testing.B) {
	sb, _ := newSandboxTB(b)
	var lat []time.Duration
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		s := time.Now()
		if _, err := sb.Run(context.Background(), rollout.Command{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(len(lat))
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/op")
}
