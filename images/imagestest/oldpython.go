package imagestest

import (
	"testing"

	"github.com/agentic-opd/agenticopd/internal/testimage"
)

// SWEOldPythonRef returns the reference of the repository test image of [SWERef] on
// an older Python: the same toy repository at /testbed and [SWEConfig], on the
// OldPython root of internal/testimage (Debian 11, bullseye: Python 3.9, pytest 6.0),
// the kind of Python most SWE-bench images run. Like SWERef's, it is packed once per
// machine and served from disk by a registry of its own that tb's cleanup closes; the
// reference is valid until tb ends.
func SWEOldPythonRef(tb testing.TB) string {
	tb.Helper()
	return sweRef(tb, "SWEOldPythonRef", testimage.OldPython, "swe/toy-oldpython:latest")
}
