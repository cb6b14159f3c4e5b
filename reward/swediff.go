package reward

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// agentDiff takes the agent's change in sb as a binary diff against startCommit.
// Failures of sb (the command could not run, git failed, the diff is too large) are
// errSolution: the agent can cause each.
func agentDiff(ctx context.Context, sb rollout.Sandbox, startCommit string, maxDiff int) (string, error) {
	if r, ok := sb.(rollout.Restorer); ok {
		if err := r.Restore(ctx); err != nil {
			return "", fmt.Errorf("restore the agent's sandbox: %w", err)
		}
	}
	const out = ".git/agenticopd-agent.diff"
	cmd := git + "add -A && " + git + "diff --cached --binary --no-color --no-ext-diff --no-textconv --full-index --no-renames --src-prefix=a/ --dst-prefix=b/ " +
		quote(startCommit) + " --output=" + out + " && wc -c <" + out
	res, err := sb.Run(ctx, rollout.Command{Shell: cmd, Timeout: gitTimeout})
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", errSolution{err}
	}
	if res.ExitCode != 0 {
		return "", errSolution{fmt.Errorf("git diff: exit %d: %s", res.ExitCode, tail(res.Stderr))}
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		return "", errSolution{fmt.Errorf("git diff: size %q", res.Stdout)}
	}
	if n > maxDiff {
		return "", errSolution{fmt.Errorf("the diff has %d bytes, more than %d", n, maxDiff)}
	}
	data, err := sb.ReadFile(out)
	if err != nil {
		return "", errSolution{err}
	}
	return string(data), nil
}

// diffSection is one file's part of a git diff.
type diffSection struct {
	paths []string
	text  string
}

// filterDiff drops the sections of diff that grading owns or that no fix needs, and
// returns the rest, the discarded paths and how many of them are test files.
func filterDiff(diff string, testFiles []string) (kept string, discarded []string, testEdits int) {
	var b strings.Builder
	for _, s := range splitDiff(diff) {
		test, drop := false, false
		for _, p := range s.paths {
			switch {
			case slices.Contains(testFiles, p), isTestPath(p):
				test, drop = true, true
			case !pathInside(p), isArtefact(p):
				drop = true
			}
		}
		if !drop {
			b.WriteString(s.text)
			continue
		}
		if len(s.paths) > 0 {
			discarded = append(discarded, s.paths[len(s.paths)-1])
		}
		if test {
			testEdits++
		}
	}
	return b.String(), discarded, testEdits
}

// splitDiff cuts a git diff at its "diff --git" headers.
func splitDiff(diff string) []diffSection {
	var out []diffSection
	for i, part := range strings.SplitAfter(diff, "\n") {
		if strings.HasPrefix(part, "diff --git ") || (i == 0 && len(out) == 0) {
			out = append(out, diffSection{})
		}
		out[len(out)-1].text += part
	}
	for i := range out {
		out[i].paths = tasks.PatchFiles(out[i].text)
		if len(out[i].paths) == 0 && strings.TrimSpace(out[i].text) != "" {
			out[i].paths = []string{"?"} // text without a file header cannot be placed
		}
	}
	return out
}

// isTestPath reports a path pytest or unittest would collect or load as a test (in a
// test directory, named test_*.py or *_test.py, or conftest.py anywhere), or one that
// configures the test run (pytest.ini, .pytest.ini, tox.ini) or Python's start-up
// (sitecustomize.py, usercustomize.py).
func isTestPath(p string) bool {
	base := path.Base(p)
	if base == "conftest.py" || strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py") ||
		strings.HasSuffix(base, "_test.py") {
		return true
	}
	switch base {
	case "pytest.ini", ".pytest.ini", "tox.ini", "sitecustomize.py", "usercustomize.py":
		// The test runner's own configuration (addopts = -p plugin), and modules
		// Python runs at start-up: no fix needs them.
		return true
	}
	for _, dir := range strings.Split(path.Dir(p), "/") {
		if dir == "tests" || dir == "test" || dir == "testing" {
			return true
		}
	}
	return false
}

// pathInside reports a relative path inside the repository and outside .git.
func pathInside(p string) bool {
	return p != "?" && !path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../") && p != ".git" &&
		!strings.HasPrefix(p, ".git/")
}

// isArtefact reports build output a fix does not need.
func isArtefact(p string) bool {
	return strings.Contains("/"+p, "/__pycache__/") || strings.HasSuffix(p, ".pyc") ||
		strings.Contains(p, ".egg-info/") || strings.Contains("/"+p, "/.pytest_cache/")
}
