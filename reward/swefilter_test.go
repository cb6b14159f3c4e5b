package reward_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
)

// filterCases are diffs whose sections name paths in every form git writes or reads:
// C-quoted with escapes, renamed, copied, mode-only, binary, and a traditional header
// after a section's hunks; each names a path some rule discards.
var filterCases = []struct {
	name, diff string
	discarded  string
}{
	{"an octal escape spells conftest.py", "diff --git \"a/conft\\145st.py\" \"b/conft\\145st.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/conft\\145st.py\"\n@@ -0,0 +1 @@\n+x\n", "conftest.py"},
	{"an octal escape spells pytest.ini", "diff --git \"a/pytest\\056ini\" \"b/pytest\\056ini\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/pytest\\056ini\"\n@@ -0,0 +1 @@\n+[pytest]\n", "pytest.ini"},
	{"a quoted test directory", "diff --git \"a/t\\145sts/x.py\" \"b/t\\145sts/x.py\"\n--- \"a/t\\145sts/x.py\"\n+++ \"b/t\\145sts/x.py\"\n@@ -1 +1 @@\n-a\n+b\n", "tests/x.py"},
	{"a quoted name with a tab", "diff --git \"a/tests/a\\tb.py\" \"b/tests/a\\tb.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/tests/a\\tb.py\"\n@@ -0,0 +1 @@\n+x\n", "tests/a\tb.py"},
	{"a name with a space", "diff --git a/tests/a b.py b/tests/a b.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/a b.py\t\n@@ -0,0 +1 @@\n+x\n", "tests/a b.py"},
	{"a rename into conftest.py", "diff --git a/x.py b/conftest.py\nsimilarity index 100%\nrename from x.py\nrename to conftest.py\n", "conftest.py"},
	{"a quoted rename", "diff --git a/x.py \"b/conft\\145st.py\"\nsimilarity index 100%\nrename from x.py\nrename to \"conft\\145st.py\"\n", "conftest.py"},
	{"a copy into a test file", "diff --git a/x.py b/tests/y.py\nsimilarity index 100%\ncopy from x.py\ncopy to tests/y.py\n", "tests/y.py"},
	{"a mode-only change of a test file", "diff --git a/tests/run.sh b/tests/run.sh\nold mode 100644\nnew mode 100755\n", "tests/run.sh"},
	{"a binary conftest.py", "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..fa76fd43f92c4d4950cd95da090a30aee4d70c5f\nGIT binary patch\nliteral 9\nQcmZQzOv=nlEUNqu01PGrh5!Hn\n\nliteral 0\nHcmV?d00001\n\n", "conftest.py"},
	{"a .gitattributes", "diff --git a/.gitattributes b/.gitattributes\nnew file mode 100644\n--- /dev/null\n+++ b/.gitattributes\n@@ -0,0 +1 @@\n+* filter=x\n", ".gitattributes"},
	{"a nested .git", "diff --git a/sub/.git/config b/sub/.git/config\nnew file mode 100644\n--- /dev/null\n+++ b/sub/.git/config\n@@ -0,0 +1 @@\n+x\n", "sub/.git/config"},
	{"squashed slashes", "diff --git a/x//conftest.py b/x//conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/x//conftest.py\n@@ -0,0 +1 @@\n+x\n", "x/conftest.py"}, // git refuses it whole
	{"packaging metadata with entry points", "diff --git a/evil.dist-info/entry_points.txt b/evil.dist-info/entry_points.txt\nnew file mode 100644\n--- /dev/null\n+++ b/evil.dist-info/entry_points.txt\n@@ -0,0 +1,2 @@\n+[pytest11]\n+x = toycalc.passall\n", "evil.dist-info/entry_points.txt"},
	{"sitecustomize as a compiled module", "diff --git a/sitecustomize.cpython-311-x86_64-linux-gnu.so b/sitecustomize.cpython-311-x86_64-linux-gnu.so\nnew file mode 100644\n--- /dev/null\n+++ b/sitecustomize.cpython-311-x86_64-linux-gnu.so\n@@ -0,0 +1 @@\n+x\n", "sitecustomize.cpython-311-x86_64-linux-gnu.so"},
	{"a traditional header hidden after a section's hunk", "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- a/conftest.py\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+x\n", "conftest.py"},
	{"an undecodable quoted name", "diff --git \"a/x\\q.py\" \"b/x\\q.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/x\\q.py\"\n@@ -0,0 +1 @@\n+x\n", "?"},
}

const keptFix = "diff --git a/toycalc/arith.py b/toycalc/arith.py\n--- a/toycalc/arith.py\n+++ b/toycalc/arith.py\n@@ -1 +1 @@\n-a\n+b\n"

func TestFilterDiff(t *testing.T) {
	section := func(p string, created bool) string {
		s := "diff --git a/" + p + " b/" + p + "\n"
		if created {
			return s + "new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+x\n"
		}
		return s + "index 1111111..2222222 100644\n--- a/" + p + "\n+++ b/" + p + "\n@@ -1 +1 @@\n-x\n+y\n"
	}
	fix := section("toycalc/arith.py", false)
	for _, tc := range []struct {
		name      string
		diff      string
		kept      string
		discarded []string
		testEdits int
	}{
		{name: "a fix alone", diff: fix, kept: fix},
		{name: "an edit of a file the test patch touches", diff: fix + section("tests/test_clamp.py", false),
			kept: fix, discarded: []string{"tests/test_clamp.py"}, testEdits: 1},
		{name: "a conftest.py planted at the root", diff: section("conftest.py", true) + fix,
			kept: fix, discarded: []string{"conftest.py"}, testEdits: 1},
		{name: "a new test file under tests/", diff: fix + section("tests/test_fake.py", true),
			kept: fix, discarded: []string{"tests/test_fake.py"}, testEdits: 1},
		{name: "a test module outside test dirs", diff: section("toycalc/test_mine.py", true) + fix,
			kept: fix, discarded: []string{"toycalc/test_mine.py"}, testEdits: 1},
		{name: "git's own files and paths out of the tree", diff: section(".git/hooks/post-checkout", true) + fix + section("../etc/x", true),
			kept: fix, discarded: []string{".git/hooks/post-checkout", "../etc/x"}},
		{name: "build artefacts", diff: section("toycalc/__pycache__/arith.cpython-311.pyc", true) + fix,
			kept: fix, discarded: []string{"toycalc/__pycache__/arith.cpython-311.pyc"}},
		{name: "packaging metadata, whatever the case of its suffix", diff: section("zz.DIST-INFO/entry_points.txt", true) + section("zz.Egg-Info/PKG-INFO", true) + fix,
			kept: fix, discarded: []string{"zz.DIST-INFO/entry_points.txt", "zz.Egg-Info/PKG-INFO"}},
		{name: "a repository's own test runner", diff: section("sympy/utilities/runtests.py", false) + fix + section("bin/test", false),
			kept: fix, discarded: []string{"sympy/utilities/runtests.py", "bin/test"}, testEdits: 2},
		{name: "sitecustomize and usercustomize as packages", diff: section("sitecustomize/__init__.py", true) + fix + section("usercustomize/__init__.py", true),
			kept: fix, discarded: []string{"sitecustomize/__init__.py", "usercustomize/__init__.py"}, testEdits: 2},
		{name: "a rename into the test patch's file", diff: "diff --git a/toycalc/x.py b/tests/test_clamp.py\nsimilarity index 100%\nrename from toycalc/x.py\nrename to tests/test_clamp.py\n" + fix,
			kept: fix, discarded: []string{"tests/test_clamp.py"}, testEdits: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, discarded, edits := reward.FilterDiff(tc.diff, []string{"tests/test_clamp.py"})
			require.Equal(t, tc.kept, kept)
			if diff := cmp.Diff(tc.discarded, discarded); diff != "" {
				t.Errorf("discarded (-want +got):\n%s", diff)
			}
			require.Equal(t, tc.testEdits, edits)
		})
	}
}

// A file or link where a test file's directory goes would make the tests' restore
// fail (a broken task) or write elsewhere: it is the tests'.
func TestFilterDiffKeepsTheTestFilesDirectories(t *testing.T) {
	testFiles := []string{"toycalc/fixtures/data.txt"}
	link := "diff --git a/toycalc/fixtures b/toycalc/fixtures\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/toycalc/fixtures\n@@ -0,0 +1 @@\n+..\n\\ No newline at end of file\n"
	fix := newFile("toycalc/fix.py", "x = 1\n")
	for _, diff := range []string{link + fix, newFile("toycalc/fixtures", "x\n") + fix} {
		kept, discarded, edits := reward.FilterDiff(diff, testFiles)
		require.Equal(t, fix, kept)
		require.Equal(t, []string{"toycalc/fixtures"}, discarded)
		require.Equal(t, 1, edits)
	}
	kept, discarded, _ := reward.FilterDiff(newFile("toycalc/fixtures.py", "x\n")+newFile("toycalc/fixture", "x\n"), testFiles)
	require.Empty(t, discarded, "only the directory's own path is the tests'")
	require.NotEmpty(t, kept)
}

// TestFilterDiffReadsPathsAsGitDoes: every rule sees the path git apply would write,
// whatever form the header gives it in; git's own reading of what is kept (git apply
// --numstat) names only the fix.
func TestFilterDiffReadsPathsAsGitDoes(t *testing.T) {
	for _, tc := range filterCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, diff := range []string{tc.diff + keptFix, keptFix + tc.diff} {
				kept, discarded, _ := reward.FilterDiff(diff, nil)
				require.Equal(t, keptFix, kept)
				require.Equal(t, []string{tc.discarded}, discarded)
				require.Equal(t, []string{"toycalc/arith.py"}, gitApplyPaths(t, kept))
			}
			// What git itself reads from the section alone names the discarded path.
			if tc.discarded != "?" && !strings.Contains(tc.diff, "//") {
				require.Contains(t, gitApplyPaths(t, tc.diff), tc.discarded)
			}
		})
	}
}

// gitApplyPaths lists the paths git apply reads from diff (git apply --numstat -z, a
// rename's target included).
func gitApplyPaths(t *testing.T, diff string) []string {
	t.Helper()
	cmd := exec.Command("git", "apply", "--numstat", "-z", "--allow-empty", "-")
	cmd.Stdin = strings.NewReader(diff)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var paths []string
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "" {
			continue
		}
		parts := strings.SplitN(f, "\t", 3)
		if len(parts) == 3 && parts[2] != "" {
			paths = append(paths, parts[2])
			continue
		}
		// A rename: "added\tdeleted\t" then the source and target as fields.
		if i+2 < len(fields) {
			paths = append(paths, fields[i+1], fields[i+2])
			i += 2
		}
	}
	return paths
}

func TestFilterDiffStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _, err := reward.FilterDiffCtx(ctx, bigDiff(1<<20, 20000), nil)
	require.ErrorIs(t, err, context.Canceled)
}

// bigDiff is a diff of about size bytes in lines lines: one file section with a
// single added run of lines (a data file, a lock file), then a fix.
func bigDiff(size, lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/data/big.lock b/data/big.lock\nnew file mode 100644\n--- /dev/null\n+++ b/data/big.lock\n@@ -0,0 +1,%d @@\n", lines)
	line := "+" + strings.Repeat("x", max(1, size/lines-2)) + "\n"
	for range lines {
		b.WriteString(line)
	}
	b.WriteString(keptFix)
	return b.String()
}

// BenchmarkFilterDiff filters an 8 MiB diff of 200,000 lines.
func BenchmarkFilterDiff(b *testing.B) {
	diff := bigDiff(8<<20, 200000)
	b.SetBytes(int64(len(diff)))
	for b.Loop() {
		kept, _, _ := reward.FilterDiff(diff, []string{"tests/test_x.py"})
		if len(kept) != len(diff) {
			b.Fatal("the diff was cut")
		}
	}
}

// FuzzFilterDiff: whatever the diff, no section of what filterDiff keeps names a
// path a rule discards, read as filterDiff reads it; and git's own reading of what
// is kept (git apply --numstat, on the seeds) agrees.
func FuzzFilterDiff(f *testing.F) {
	for _, tc := range filterCases {
		f.Add(tc.diff + keptFix)
		f.Add(keptFix + tc.diff)
	}
	f.Add("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n" + "diff --git a/tests/t.py b/tests/t.py\n")
	f.Add("garbage before\n" + keptFix)
	f.Add("diff --git \"a/x\\\"y.py\" \"b/x\\\"y.py\"\n--- \"a/x\\\"y.py\"\n+++ \"b/x\\\"y.py\"\n@@ -1,2 +1 @@\n-a\n--- a/conftest.py\n+b\n")
	testFiles := []string{"tests/t.py"}
	f.Fuzz(func(t *testing.T, diff string) {
		kept, discarded, edits := reward.FilterDiff(diff, testFiles)
		require.LessOrEqual(t, len(kept), len(diff))
		require.LessOrEqual(t, edits, len(discarded))
		for _, paths := range reward.SectionPaths(kept) {
			for _, p := range paths {
				require.True(t, reward.PathKept(p, testFiles), "a kept section names %q", p)
			}
		}
		if kept == "" || len(kept) > 8<<10 {
			return
		}
		// git's own reading: whatever git apply would write must pass the rules too.
		cmd := exec.Command("git", "apply", "--numstat", "-z", "--allow-empty", "-")
		cmd.Stdin = strings.NewReader(kept)
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil {
			return // git refuses it whole: nothing is written
		}
		for _, f := range strings.Split(string(out), "\x00") {
			parts := strings.SplitN(f, "\t", 3)
			p := f
			if len(parts) == 3 {
				p = parts[2]
			}
			if p == "" {
				continue
			}
			require.True(t, reward.PathKept(p, testFiles), "git apply reads %q from what was kept:\n%q", p, kept)
		}
	})
}
