package atropostest

import (
	"fmt"
	"net/http"
	"sync"
)

// Hold is an answer the fake computed and keeps back until [Hold.Release]: see
// [Server.HoldNext].
type Hold struct {
	path    string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// Held is closed once a request took the hold: its answer is computed, from the state
// of the API process that took the request, and kept back.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release sends the answer kept back. It is idempotent; [Server.Close] releases every
// hold (a hold no request took then does nothing).
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// HoldNext keeps back the answer to the next request to path: the API process that
// takes the request computes the answer at once (state changes included), and the
// answer reaches the client only when the returned Hold is released, even when that
// process was killed or restarted meanwhile ([Server.Kill], [Server.Restart]): the
// connection is taken out of the process's hands. So a test can make an answer of the
// old API arrive after a restart, as a slow network or a stopped client process does.
// The held answer is sent without gzip, with "Connection: close".
func (s *Server) HoldNext(path string) *Hold {
	h := &Hold{path: path, held: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[path] = append(s.holds[path], h)
	return h
}

// takeHold returns the first hold waiting for path, or nil.
func (s *Server) takeHold(path string) *Hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.holds[path]
	if len(hs) == 0 {
		return nil
	}
	h := hs[0]
	s.holds[path] = hs[1:]
	return h
}

// writeHeld takes the connection from the http.Server (a killed process no longer
// closes it), waits for the hold's release, then writes rep and closes the connection.
func (s *Server) writeHeld(w http.ResponseWriter, r *http.Request, h *Hold, rep reply) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		close(h.held)
		<-h.release
		s.write(w, r, rep)
		return
	}
	conn, rw, err := hj.Hijack()
	close(h.held)
	if err != nil {
		<-h.release
		return
	}
	defer conn.Close()
	<-h.release
	ctype := "application/json"
	if rep.text {
		ctype = "text/plain; charset=utf-8"
	}
	fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		rep.status, http.StatusText(rep.status), ctype, len(rep.body))
	_, _ = rw.Write(rep.body)
	_ = rw.Flush()
}
