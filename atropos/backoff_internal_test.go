package atropos

import (
	"testing"
	"time"
)

// TestBackoffBounds checks the wait after every attempt stays within [MinBackoff/2,
// MaxBackoff], also for long outages and minimums whose doubling would overflow.
func TestBackoffBounds(t *testing.T) {
	tests := []RetryConfig{
		{MinBackoff: 500 * time.Millisecond, MaxBackoff: 10 * time.Second},
		{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		{MinBackoff: 1<<34 + 1, MaxBackoff: time.Hour}, // << 30 wraps to about 1s
		{MinBackoff: time.Minute, MaxBackoff: 24 * time.Hour},
	}
	for _, r := range tests {
		for attempt := 1; attempt <= 100; attempt++ {
			for range 20 {
				w := backoff(r, attempt)
				if w < r.MinBackoff/2 || w > r.MaxBackoff {
					t.Fatalf("%+v attempt %d: wait %v outside [%v, %v]", r, attempt, w, r.MinBackoff/2, r.MaxBackoff)
				}
			}
		}
	}
}
