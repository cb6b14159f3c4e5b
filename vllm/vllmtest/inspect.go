package vllmtest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentic-opd/agenticopd/internal/fakehttp"
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
	reqs := s.log.All()
	for i := range reqs {
		var obj map[string]any
		if json.Unmarshal(reqs[i].Body, &obj) == nil {
			reqs[i].JSON = obj
		}
	}
	return reqs
}

// RequestCount returns how many requests were received for path ("" counts all).
func (s *Server) RequestCount(path string) int { return s.log.Count(path) }

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() { s.log.Reset() }

func (s *Server) record(r *http.Request, body []byte) *fakehttp.Entry[Request] {
	rec := Request{Method: r.Method, Path: r.URL.Path, Body: body} // JSON is decoded by Requests
	return s.log.Add(rec.Path, rec)
}

// setStatus records the answered status of e (a request [Server.ResetRequests] dropped
// stays dropped).
func (s *Server) setStatus(e *fakehttp.Entry[Request], status int, fault bool) {
	s.log.Update(e, func(r *Request) {
		r.Status = status
		r.Fault = r.Fault || fault
	})
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

// AddFault installs f; the returned function removes it.
func (s *Server) AddFault(f Fault) (remove func()) { return s.faults.Add(fakehttp.Fault(f)) }

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() { s.faults.Clear() }

// SetError makes every request to path fail with status and body (see [Fault.Body])
// until the returned function or [Server.ClearFaults] removes it.
func (s *Server) SetError(path string, status int, body string) (remove func()) {
	return s.AddFault(Fault{Path: path, Status: status, Body: body})
}

// FailNext makes the next n requests to path fail with status and body.
func (s *Server) FailNext(path string, n, status int, body string) {
	s.AddFault(Fault{Path: path, Times: n, Status: status, Body: body})
}

// malformedBody is the truncated answer of a Malformed fault.
const malformedBody = `{"id":"cmpl-broken","object":"text_completion","choices":[{"index":0,"te`

// applyFaults runs the triggered faults in install order, each waiting its Delay before
// it acts; handled is true when the request was answered (or abandoned) by a fault.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request, e *fakehttp.Entry[Request]) (handled bool) {
	for _, f := range s.faults.Trigger(r.URL.Path) {
		if !fakehttp.Wait(r.Context(), f.Delay) {
			s.setStatus(e, 0, true)
			return true
		}
		switch {
		case f.Drop:
			s.setStatus(e, 0, true)
			fakehttp.Drop(w)
			return true
		case f.Malformed:
			s.setStatus(e, http.StatusOK, true)
			fakehttp.WriteJSON(w, http.StatusOK, []byte(malformedBody))
			return true
		case f.Status > 0:
			s.setStatus(e, f.Status, true)
			if f.Body != "" {
				fakehttp.WriteJSON(w, f.Status, []byte(f.Body))
				return true
			}
			s.writeError(w, f.Status, "injected fault")
			return true
		}
	}
	return false
}
