package nemogym_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/tasks"
)

// BenchmarkServerOverhead is the agent server's own work per rollout, beyond the
// rollout: reading the row, building the output items with token fields and teacher
// rows, encoding and writing the answer. %_of_rollout relates it to a rollout whose
// model calls take 50 ms each (the target: under 1%).
func BenchmarkServerOverhead(b *testing.B) {
	for _, sz := range []struct {
		name                               string
		calls, prompt, gen, result, hinted int
	}{
		{"5calls_4k_tokens_2hinted", 5, 1000, 300, 300, 2},
		{"5calls_4k_tokens_allhinted", 5, 1000, 300, 300, 5},
		{"15calls_16k_tokens_3hinted", 15, 1500, 600, 400, 3},
		{"15calls_16k_tokens_allhinted", 15, 1500, 600, 400, 15},
	} {
		b.Run(sz.name, func(b *testing.B) {
			out := nemogym.SyntheticOutcome(sz.calls, sz.prompt, sz.gen, sz.result, 8, sz.hinted)
			s, err := nemogym.NewServer(nemogym.Config{Runner: nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
				return out, nil
			}), KeepBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			row := `{"responses_create_params":{"input":"q","temperature":1.0,"top_p":1.0},"task":{"id":"t","statement":"Say a."},"_ng_task_index":0}`
			bytesOut := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(row)))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
				}
				bytesOut = rec.Body.Len()
			}
			b.StopTimer()
			per := b.Elapsed() / time.Duration(b.N)
			rolloutTime := time.Duration(sz.calls) * 50 * time.Millisecond
			b.ReportMetric(100*float64(per)/float64(rolloutTime), "%_of_rollout")
			b.ReportMetric(float64(bytesOut), "answer_bytes")
			s.Wait()
		})
	}
}
