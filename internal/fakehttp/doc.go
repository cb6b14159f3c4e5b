// Package fakehttp holds what the in-process fakes of this module ([vllmtest] and
// [atropostest]) share: injected faults matched to a request path and counted
// ([Faults]), the waits, dropped connections and truncated bodies those faults produce
// ([Wait], [Drop], [WriteJSON]), and the log of requests received ([Log]).
//
// Each fake keeps its own exported Fault and Request types, documented for its users,
// and converts them to and from this package's forms; each fake also keeps its own
// error bodies. Everything here is safe for concurrent use.
//
// [vllmtest]: github.com/agentic-opd/agenticopd/vllm/vllmtest
// [atropostest]: github.com/agentic-opd/agenticopd/atropos/atropostest
package fakehttp
