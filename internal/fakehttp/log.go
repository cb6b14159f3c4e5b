package fakehttp

import "sync"

// Log records the requests a fake received, of the fake's own record type R, each with
// its path. The zero value is empty and ready to use.
type Log[R any] struct {
	mu      sync.Mutex
	entries []*Entry[R]
}

// Entry is one recorded request; [Log.Update] changes it after the fact.
type Entry[R any] struct {
	path string
	rec  R
}

// Add appends rec, received for path, and returns its entry.
func (l *Log[R]) Add(path string, rec R) *Entry[R] {
	e := &Entry[R]{path: path, rec: rec}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	return e
}

// Update calls fn on the record of e under the log's lock. An entry [Log.Reset] dropped
// is still updated, but no longer listed.
func (l *Log[R]) Update(e *Entry[R], fn func(*R)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(&e.rec)
}

// All returns a copy of the records, in the order they were added.
func (l *Log[R]) All() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		return nil
	}
	out := make([]R, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.rec
	}
	return out
}

// Count returns how many records were added for path ("" counts all).
func (l *Log[R]) Count(path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if path == "" || e.path == path {
			n++
		}
	}
	return n
}

// Reset forgets every record.
func (l *Log[R]) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}
