// Package testctx gives tests a limit that is the test binary's own, not a wall-clock
// figure of their own: on a loaded machine a test's work takes as long as it takes, and
// only a hang ends it, at the binary's deadline (go test -timeout; test.sh gives each
// package 30 minutes), a little before it, so that the test that hangs fails with its
// own message instead of go test's panic.
package testctx

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends shortly before the test binary's deadline, or
// never when it has none (-timeout 0). It is cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := tt.Deadline(); ok {
			cancel()
			// Leave go test a twentieth of what is left (at least 5 s) to report.
			margin := max(time.Until(d)/20, 5*time.Second)
			ctx, cancel = context.WithDeadline(context.Background(), d.Add(-margin))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// Left returns the time until [Context]'s deadline, or a day when the test binary has
// no deadline: a limit for work a test starts whose own time limit is not what it
// checks (a verifier's case timeout, say), so that a loaded machine only makes it slow.
func Left(t testing.TB) time.Duration {
	if d, ok := Context(t).Deadline(); ok {
		return time.Until(d)
	}
	return 24 * time.Hour
}

// Eventually polls cond every tick until it holds, and fails the test if the test
// binary's deadline comes first.
func Eventually(t testing.TB, cond func() bool, tick time.Duration, msgAndArgs ...any) {
	t.Helper()
	ctx := Context(t)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			if cond() {
				return
			}
			t.Fatal(append([]any{"the condition still does not hold at the test binary's deadline:"}, msgAndArgs...)...)
		case <-tk.C:
		}
	}
}
