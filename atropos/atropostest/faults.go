package atropostest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/internal/fakehttp"
)

// Request is one request the server received.
type Request struct {
	// Method is the request's HTTP method.
	Method string
	// Path is the request's URL path.
	Path string
	// Body is the request body, after gzip decoding.
	Body []byte
	// Gzip is true when the body arrived gzip-encoded.
	Gzip bool
	// Status is the status code answered; 0 when the server answered nothing (a dropped
	// connection, the server set down, or a client that went away during a delay).
	Status int
	// Fault is true when an injected fault decided the answer.
	Fault bool
}

// Requests returns a copy of the requests received so far, in arrival order.
func (s *Server) Requests() []Request { return s.log.All() }

// RequestCount returns how many requests were received for path ("" counts all).
func (s *Server) RequestCount(path string) int { return s.log.Count(path) }

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() { s.log.Reset() }

// Fault describes an injected failure. A request matches when Path is empty or equal to
// its path; a matching request triggers the fault on every Every-th match (0 or 1: each
// one), at most Times times (0: no limit). A triggered fault first waits Delay (giving up
// if the client goes away), then does the first of: Drop, Malformed, Status. A fault with
// only a Delay lets the request proceed normally afterwards.
type Fault struct {
	// Path is the URL path the fault applies to; empty matches every path.
	Path string
	// Every triggers the fault on every Every-th matching request (0 or 1: each one).
	Every int
	// Times bounds how often the fault triggers (0: no limit).
	Times int

	// Delay is latency added before answering; it honours the request's context.
	Delay time.Duration
	// Drop closes the connection without answering (the client sees EOF / reset).
	Drop bool
	// Malformed answers 200 with a truncated JSON body.
	Malformed bool
	// Status answers with this status code and Body. An empty Body becomes the API's
	// shape for that status: text/plain "Internal Server Error" style for 5xx, a
	// FastAPI {"detail": ...} object otherwise.
	Status int
	// Body is the body of a Status answer; empty means the API's shape for it.
	Body string
}

// AddFault installs f; the returned function removes it.
func (s *Server) AddFault(f Fault) (remove func()) { return s.faults.Add(fakehttp.Fault(f)) }

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() { s.faults.Clear() }

// SetError makes every request to path ("" for all) fail with status and body until the
// returned function or [Server.ClearFaults] removes it.
func (s *Server) SetError(path string, status int, body string) (remove func()) {
	return s.AddFault(Fault{Path: path, Status: status, Body: body})
}

// FailNext makes the next n requests to path ("" for all) fail with status and body.
func (s *Server) FailNext(path string, n, status int, body string) {
	s.AddFault(Fault{Path: path, Times: n, Status: status, Body: body})
}

// SetDown makes the server drop every connection without an answer while down is true,
// as when the API process is gone: clients see network errors.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	body, err := io.ReadAll(r.Body)
	var rep reply
	switch {
	case err != nil:
		rep = reply{status: 400, body: []byte("unreadable body"), text: true}
	case strings.Contains(strings.ToLower(r.Header.Get("Content-Encoding")), "gzip") && len(body) > 0:
		// An empty body stays empty, as upstream: the endpoint then reports what is missing.
		rec.Gzip = true
		zr, zerr := gzip.NewReader(bytes.NewReader(body))
		if zerr == nil {
			body, zerr = io.ReadAll(zr)
		}
		if zerr != nil {
			rep = reply{status: 400, body: []byte("Invalid gzip payload"), text: true}
		}
	}
	rec.Body = body

	s.mu.Lock()
	down, gen := s.down, s.gen
	s.mu.Unlock()
	faults := s.faults.Trigger(r.URL.Path)
	if down {
		s.recordAnd(rec, gen, nil)
		fakehttp.Drop(w)
		return
	}
	if rep.status == 0 && len(faults) > 0 {
		rec.Fault = true
		// Unlike vllmtest, the delays of all triggered faults add up before the first
		// that acts answers.
		var delay time.Duration
		for _, f := range faults {
			delay += f.Delay
		}
		if !fakehttp.Wait(r.Context(), delay) {
			s.recordAnd(rec, gen, nil)
			return
		}
		rep = faultReply(faults)
		if rep.status == -1 {
			s.recordAnd(rec, gen, nil)
			fakehttp.Drop(w)
			return
		}
	}
	if !s.recordAnd(rec, gen, func() reply {
		if rep.status == 0 {
			rep = s.route(r, body)
		}
		return rep
	}) {
		fakehttp.Drop(w) // the process that took this request was killed meanwhile
		return
	}
	s.logger.Debug("atropostest", "method", rec.Method, "path", rec.Path, "status", rep.status, "gzip", rec.Gzip, "bytes", len(body))
	if h := s.takeHold(r.URL.Path); h != nil {
		s.writeHeld(w, r, h, rep)
		return
	}
	s.write(w, r, rep)
}

// recordAnd runs answer (if any) and records rec with its status, both under s.mu so
// that state changes and the request log agree.
// A request that arrived at an API process since killed changes nothing and gets no
// answer; recordAnd reports false for it.
func (s *Server) recordAnd(rec Request, gen int, answer func() reply) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		s.log.Add(rec.Path, rec)
		return false
	}
	if answer != nil {
		rec.Status = answer().status
	}
	s.log.Add(rec.Path, rec)
	return true
}

// faultReply turns the triggered faults into an answer: status -1 drops the connection,
// 0 lets the request through.
func faultReply(faults []fakehttp.Fault) reply {
	for _, f := range faults {
		switch {
		case f.Drop:
			return reply{status: -1}
		case f.Malformed:
			return reply{status: 200, body: []byte(`{"status": "rec`)}
		case f.Status != 0:
			if f.Body != "" {
				return reply{status: f.Status, body: []byte(f.Body), text: !json.Valid([]byte(f.Body))}
			}
			if f.Status >= 500 {
				return reply{status: f.Status, body: []byte(http.StatusText(f.Status)), text: true}
			}
			return errReply(f.Status, http.StatusText(f.Status))
		}
	}
	return reply{}
}
