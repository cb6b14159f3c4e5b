package rollout

import (
	"context"
	"time"
)

// CapResult exposes capResult to the external tests.
var CapResult = capResult

// ReadLines exposes readLines to the external tests.
var ReadLines = readLines

// Spent returns what the file tools have counted in ctx's rollout account: host
// time, bytes read and written, matching work (instruction-bytes).
func Spent(ctx context.Context) (time.Duration, int64, int64) {
	a := accountOf(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.elapsed, a.bytes, a.work
}

// The caps of the file tools, for the external tests.
const (
	SearchMaxWork         = searchMaxWork
	SearchMaxScan         = searchMaxScan
	SearchMaxPatternInsts = searchMaxPatternInsts
)
