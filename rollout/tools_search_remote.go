package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Searcher is implemented by a [Sandbox] that runs the search of search_files where
// its files are (the Kubernetes backend runs it inside the pod, so that a search of
// a repository is one exec and only the matches cross the network, instead of one
// exec per file through [Sandbox.FS]). It is optional, found by a type assertion
// like [Starter]. The search must be the one search_files does on the host, with
// the same caps and the same per-call bound of 4 KiB per regexp call (package
// internal/filesearch holds the code both sides run): the tool's output is the same
// whichever side searched.
//
// Implementations must be safe for concurrent use.
type Searcher interface {
	// SearchFiles searches the workspace as q says and reports what it found. A
	// search stopped at a cap or at its deadline is a result (SearchResult.Cap);
	// the error is for the sandbox itself (it could not run the search), or ctx's.
	SearchFiles(ctx context.Context, q SearchQuery) (SearchResult, error)
}

// SearchQuery is one search_files call, already checked by the tool: a pattern
// within the tool's caps, a valid glob and a workspace-relative directory.
type SearchQuery struct {
	// Pattern is the regular expression (RE2 syntax).
	Pattern string `json:"pattern"`
	// Path is the directory searched, relative to the workspace ("." for it).
	Path string `json:"path"`
	// Glob, when set, selects the files searched (see the tool's description).
	Glob string `json:"glob,omitempty"`
	// MaxBytes is the most bytes the search reads, all files together; MaxWork the
	// most matching it does, in instruction-bytes (each line's length plus one
	// times the pattern's instructions). Both are what the call and its rollout
	// have left.
	MaxBytes int64 `json:"max_bytes"`
	MaxWork  int64 `json:"max_work"`
	// Timeout is the time the search may take.
	Timeout time.Duration `json:"timeout"`
}

// The caps a search can stop at, in SearchResult.Cap.
const (
	SearchCapBytes    = "bytes"    // MaxBytes read
	SearchCapWork     = "work"     // MaxWork matched
	SearchCapDeadline = "deadline" // Timeout passed
)

// SearchResult is what a search found.
type SearchResult struct {
	// Matches are the first 50 matching lines as search_files shows them
	// ("path:line: text", the text cut at 200 characters); Total counts every
	// matching line found.
	Matches []string `json:"matches,omitempty"`
	Total   int      `json:"total"`
	// TooLarge counts the files over 1 MiB not searched; Windowed the lines over
	// 4 KiB matched in windows; Stopped says the walk stopped at its entry or
	// depth bound.
	TooLarge int  `json:"too_large,omitempty"`
	Windowed int  `json:"windowed,omitempty"`
	Stopped  bool `json:"stopped,omitempty"`
	// Bytes, Work and Largest are what the search spent: bytes read, matching
	// done, and the most bytes one regexp call was given.
	Bytes   int64 `json:"bytes"`
	Work    int64 `json:"work"`
	Largest int64 `json:"largest"`
	// Cap, when set, is the cap the search stopped at (SearchCapBytes, ...); for
	// SearchCapWork, CapCost and CapLen are the match call it refused: the
	// pattern's instructions and the bytes it would have been given.
	Cap     string `json:"cap,omitempty"`
	CapCost int64  `json:"cap_cost,omitempty"`
	CapLen  int64  `json:"cap_len,omitempty"`
	// Error, when set, is why the search could not begin (its directory is
	// missing or is not one), as the host-side search reports it.
	Error string `json:"error,omitempty"`
}

// searchSandbox is search_files' search run by a [Searcher], within the same caps
// as the host-side search (the call's meter, lowered to what the rollout has left),
// and its result written as the host-side search writes it. root is the cleaned
// workspace-relative directory, pattern and glob already checked.
func (t searchFilesTool) searchSandbox(ctx context.Context, s Searcher, pattern, root, glob string) string {
	m, cancel, err := t.cfg.begin(ctx, searchMaxScan, searchMaxWork)
	if err != nil {
		return errorResult("search_files: %v", err)
	}
	defer cancel()
	defer m.end()
	left := t.cfg.FileToolTimeout
	if d, ok := m.ctx.Deadline(); ok {
		left = time.Until(d)
	}
	r, err := s.SearchFiles(m.ctx, SearchQuery{Pattern: pattern, Path: root, Glob: glob,
		MaxBytes: m.maxBytes, MaxWork: m.maxWork, Timeout: left})
	if err != nil {
		if perr := m.parent.Err(); perr != nil {
			return errorResult("search_files: %v", perr)
		}
		return errorResult("search_files: the sandbox could not search: %v", err)
	}
	m.bytes, m.work, m.largest = r.Bytes, r.Work, r.Largest
	if r.Error != "" {
		return errorResult("search_files: %s", r.Error)
	}
	var capped error
	switch r.Cap {
	case SearchCapBytes:
		m.bytes = max(m.bytes, m.maxBytes+1)
		capped = m.scan(0)
	case SearchCapWork:
		capped = m.match(r.CapCost, r.CapLen)
		if capped == nil { // the sandbox counted otherwise: say the cap anyway
			capped = capErrorf("stopped: the search reached its matching budget of %d instruction-bytes", m.maxWork)
		}
	case SearchCapDeadline:
		capped = deadlineCap(m)
	}
	if capped != nil {
		var c *capError
		if !errors.As(capped, &c) {
			return errorResult("search_files: %v", capped)
		}
	}
	var notes []string
	if r.TooLarge > 0 {
		notes = append(notes, fmt.Sprintf("%d files larger than the %d MiB search_files reads were not searched; use the terminal (grep) for them",
			r.TooLarge, searchMaxFileSize>>20))
	}
	if r.Windowed > 0 {
		notes = append(notes, fmt.Sprintf("%d lines longer than %d bytes were matched in windows of that size overlapping by %d bytes: "+
			"a longer match is found only within one window; use the terminal (grep) for those", r.Windowed, searchMatchWindow, searchMatchOverlap))
	}
	if r.Stopped {
		notes = append(notes, fmt.Sprintf("the search stopped at %d entries or %d directories deep; give a narrower path",
			searchMaxEntries, searchMaxDepth))
	}
	matches := r.Matches[:min(len(r.Matches), searchMaxMatches)]
	joined := capText(strings.Join(matches, "\n"), t.cfg.MaxOutputChars)
	res := searchResult{Matches: joined, Total: r.Total, Truncated: r.Total > len(matches) || r.Stopped || capped != nil, Note: strings.Join(notes, "; ")}
	if capped != nil {
		res.Error = "search_files " + capped.Error()
	}
	return jsonResult(res)
}

// deadlineCap is the error of a search the sandbox stopped at the call's deadline,
// as meter.expired words it (the sandbox's clock may reach the deadline a moment
// before the host's).
func deadlineCap(m *meter) error {
	if err := m.parent.Err(); err != nil {
		return err
	}
	if m.rollout {
		return capErrorf("stopped at the end of the %s of host time this rollout's file tools may use", m.rollCap)
	}
	return capErrorf("stopped after %s, the time one call of a file tool may take", m.timeout)
}
