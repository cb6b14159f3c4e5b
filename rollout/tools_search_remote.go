package rollout

import (
	"context"
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
