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

// LargestMatch returns the most bytes one regexp match call of search_files was
// given in ctx's rollout account.
func LargestMatch(ctx context.Context) int64 {
	a := accountOf(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.largest
}

// The caps of the file tools, for the external tests.
const (
	SearchMaxWork         = searchMaxWork
	SearchMaxScan         = searchMaxScan
	SearchMaxPatternInsts = searchMaxPatternInsts
	SearchMatchWindow     = searchMatchWindow
	SearchMatchOverlap    = searchMatchOverlap
)

// Spend adds bytes and matching work to ctx's rollout account, as calls would.
func Spend(ctx context.Context, bytes, work int64) {
	a := accountOf(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bytes += bytes
	a.work += work
}

// The caps of one rollout, for the external tests.
const (
	RolloutMaxFileBytes = rolloutMaxFileBytes
	RolloutMaxMatchWork = rolloutMaxMatchWork
)

// CapText exposes capText to the external tests.
var CapText = capText
