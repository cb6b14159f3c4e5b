package tasks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestPatchFilesReadsQuotedNames: a test patch's files are named as git reads them,
// so the files restored and discarded are the ones the patch writes.
func TestPatchFilesReadsQuotedNames(t *testing.T) {
	patch := "diff --git \"a/t\\145sts/caf\\303\\251.py\" \"b/t\\145sts/caf\\303\\251.py\"\nnew file mode 100644\n" +
		"--- /dev/null\n+++ \"b/t\\145sts/caf\\303\\251.py\"\n@@ -0,0 +1 @@\n+x\n" +
		"diff --git a/tests/x.py b/tests/y.py\nsimilarity index 90%\nrename from tests/x.py\nrename to tests/y.py\n" +
		"--- a/tests/x.py\n+++ b/tests/y.py\n"
	require.Equal(t, []string{"tests/café.py", "tests/x.py", "tests/y.py"}, tasks.PatchFiles(patch))
}
