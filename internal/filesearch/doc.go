// Package filesearch is the search of the search_files tool: a walk of a
// workspace, files read line by line, a regular expression matched within a budget
// of bytes read and matching work, and no more than [MatchWindow] bytes given to one
// call of Go's regexp (which cannot be interrupted).
//
// It exists so that the two places that run that search run the same code: package
// rollout on the host (its lineMatcher is [Matcher]) and the Kubernetes pod helper
// (cmd/agenticopd-pod), which runs [Search] inside the pod for a sandbox that
// implements rollout.Searcher. It depends on the standard library only, so that the
// helper stays a small static binary.
//
// The walk, the line reader and the caps here mirror those of package rollout's
// host-side search_files (tools_builtin.go, tools_stream.go, tools_budget.go), which
// do not yet call this package; a test of package podproto runs both on the same
// tree and compares the tool's output byte for byte.
package filesearch
