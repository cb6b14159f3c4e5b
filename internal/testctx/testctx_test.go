package testctx

import (
	"testing"
	"time"
)

func TestContextEndsBeforeTheBinarysDeadline(t *testing.T) {
	ctx := Context(t)
	d, ok := t.Deadline()
	got, has := ctx.Deadline()
	if has != ok {
		t.Fatalf("the context has a deadline: %v; the test binary: %v", has, ok)
	}
	if ok && !got.Before(d) {
		t.Fatalf("the context ends at %v, not before the binary's deadline %v", got, d)
	}
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Eventually(t, func() bool { n++; return n >= 3 }, time.Millisecond)
	if n < 3 {
		t.Fatalf("returned after %d polls", n)
	}
}
