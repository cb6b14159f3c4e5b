package fakehttp

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Fault is an injected failure, in the shape of the fakes' exported Fault types (whose
// fields come in the same order, so that they convert to it). A request matches when
// Path is empty or equal to its path; a matching request triggers the fault on every
// Every-th match (0 or 1: each one), at most Times times (0: no limit). What a triggered
// fault does (Delay, Drop, Malformed, Status and Body) is up to the fake.
type Fault struct {
	Path  string // path the fault applies to; "" matches every request
	Every int    // trigger on every Every-th matching request; 0 or 1 means each one
	Times int    // most times the fault triggers; 0 means no limit

	Delay     time.Duration // latency the fake adds before answering
	Drop      bool          // the fake closes the connection without answering
	Malformed bool          // the fake answers 200 with a truncated JSON body
	Status    int           // status code the fake answers with; 0 means none
	Body      string        // body sent with Status; "" leaves it to the fake
}

// Faults is a registry of installed faults. The zero value holds none and is ready to use.
type Faults struct {
	mu   sync.Mutex
	list []*faultState
}

type faultState struct {
	f     Fault
	seen  int
	fired int
}

// Add installs f after the faults already installed; the returned function removes it
// (calling it again, or after [Faults.Clear], does nothing).
func (r *Faults) Add(f Fault) (remove func()) {
	st := &faultState{f: f}
	r.mu.Lock()
	r.list = append(r.list, st)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.list = slices.DeleteFunc(r.list, func(x *faultState) bool { return x == st })
	}
}

// Clear removes every installed fault.
func (r *Faults) Clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = nil
}

// Trigger counts a request to path against every installed fault and returns those that
// fire for it, in install order. A fault that has fired Times times no longer counts
// matches.
func (r *Faults) Trigger(path string) []Fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Fault
	for _, st := range r.list {
		if st.f.Path != "" && st.f.Path != path {
			continue
		}
		if st.f.Times > 0 && st.fired >= st.f.Times {
			continue
		}
		st.seen++
		if st.f.Every > 1 && st.seen%st.f.Every != 0 {
			continue
		}
		st.fired++
		out = append(out, st.f)
	}
	return out
}

// Wait waits d, or less when ctx ends first; it reports whether the whole wait passed.
// A d of zero or less returns true at once, whatever the state of ctx.
func Wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Drop closes the connection under w without an answer, so that the client sees EOF or
// a reset. When w cannot be hijacked it panics with [http.ErrAbortHandler], which the
// server turns into the same abrupt end; call it from a handler only.
func Drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// WriteJSON answers status with body as application/json, whether or not body is valid
// JSON: a Malformed fault passes a truncated body here.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
