package agenticopd

import (
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/opd"
)

// AttachRows gives data the teacher rows of res as e does for its groups, for the
// benchmarks that replay a group's post-processing.
func (e *Env) AttachRows(data *atropos.ScoredDataGroup, res opd.Result) error {
	return e.attachRows(data, res)
}
