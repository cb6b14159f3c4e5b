package vllmtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	// Body is the raw request body.
	Body []byte
	// JSON is Body decoded as a JSON object; nil when it is not one.
	JSON map[string]any
	// Status is the status code answered; 0 when the server answered nothing (a dropped
	// connection, or a client that went away during an injected delay).
	Status int
	// Fault is true when an injected fault decided the answer.
	Fault bool
}

// Requests returns a copy of the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// RequestCount returns how many requests were received for path ("" counts all).
func (s *Server) RequestCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if path == "" || r.Path == path {
			n++
		}
	}
	return n
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *Server) record(r *http.Request, body []byte) int {
	rec := Request{Method: r.Method, Path: r.URL.Path, Body: body}
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		rec.JSON = obj
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	return len(s.requests) - 1
}

func (s *Server) setStatus(idx, status int, fault bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// ResetRequests may have dropped the entry.
	if idx < len(s.requests) {
		s.requests[idx].Status = status
		s.requests[idx].Fault = s.requests[idx].Fault || fault
	}
}

// Fault describes an injected failure. A request matches when Path is empty or equal to
// its path; a matching request triggers the fault on every Every-th match (0 or 1: each
// one), at most Times times (0: no limit). A triggered fault first waits Delay (giving
// up if the client goes away), then does the first of: Drop, Malformed, Status. A fault
// with only a Delay lets the request proceed normally afterwards.
type Fault struct {
	Path  string
	Every int
	Times int

	// Delay is latency added before answering; it honours the request's context.
	Delay time.Duration
	// Drop closes the connection without answering (the client sees EOF / reset).
	Drop bool
	// Malformed answers 200 with a truncated JSON body.
	Malformed bool
	// Status answers with this status code and Body. An empty Body becomes a vLLM
	// error body in the server's error shape.
	Status int
	Body   string
}

type faultState struct {
	f     Fault
	seen  int
	fired int
}

// AddFault installs f; the returned function removes it.
func (s *Server) AddFault(f Fault) (remove func()) {
	st := &faultState{f: f}
	s.mu.Lock()
	s.faults = append(s.faults, st)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.faults = slices.DeleteFunc(s.faults, func(x *faultState) bool { return x == st })
	}
}

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SetError makes every request to path fail with status and body (see [Fault.Body])
// until the returned function or [Server.ClearFaults] removes it.
func (s *Server) SetError(path string, status int, body string) (remove func()) {
	return s.AddFault(Fault{Path: path, Status: status, Body: body})
}

// FailNext makes the next n requests to path fail with status and body.
func (s *Server) FailNext(path string, n, status int, body string) {
	s.AddFault(Fault{Path: path, Times: n, Status: status, Body: body})
}

// triggered returns the faults that fire for a request to path, in install order.
func (s *Server) triggered(path string) []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Fault
	for _, st := range s.faults {
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

// applyFaults runs the triggered faults; handled is true when the request was answered
// (or abandoned) by a fault.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request, idx int) (handled bool) {
	for _, f := range s.triggered(r.URL.Path) {
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-r.Context().Done():
				t.Stop()
				s.setStatus(idx, 0, true)
				return true
			case <-t.C:
			}
		}
		switch {
		case f.Drop:
			s.setStatus(idx, 0, true)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return true
				}
			}
			panic(http.ErrAbortHandler)
		case f.Malformed:
			s.setStatus(idx, http.StatusOK, true)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"id":"cmpl-broken","object":"text_completion","choices":[{"index":0,"te`))
			return true
		case f.Status > 0:
			s.setStatus(idx, f.Status, true)
			if f.Body != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(f.Status)
				_, _ = w.Write([]byte(f.Body))
				return true
			}
			s.writeError(w, f.Status, "injected fault")
			return true
		}
	}
	return false
}
