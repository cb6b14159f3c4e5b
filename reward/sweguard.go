package reward

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Bounds of what grading reads from its own sandbox.
const (
	// maxListing bounds a listing of paths (untracked files, changed files, modules).
	maxListing = 16 << 20
	// maxConfigFile bounds a setup.cfg or pyproject.toml whose pytest section is
	// checked; a larger one changed by the agent is restored whole.
	maxConfigFile = 1 << 20
)

// startState is what the grading sandbox held once prepared, before the agent's
// change went in.
type startState struct {
	// untracked lists what the work tree held untracked (ignored): git ls-files -o
	// --directory, directories with a trailing slash.
	untracked []string
	// inits lists the tracked __init__.py files.
	inits map[string]bool
	// modules are the top-level modules the image's Python provides outside the
	// repository (nil for a task that does not run Python).
	modules map[string]bool
	// pathDirs are the directories inside the repository on the image's Python
	// path, besides the repository itself.
	pathDirs map[string]bool
}

// listModules prints the top-level modules a Python provides outside the working
// directory: built in, and found on its sys.path and PYTHONPATH (site-packages,
// the standard library), run with -I so that the working directory itself is not on
// its path; and, each as "/" and its path relative to the working directory, the
// directories inside the working directory that are on its path (an editable
// install's .pth file, PYTHONPATH). It runs on every Python from 3.4 on.
const listModules = `import os, sys, pkgutil
root = os.path.realpath(os.getcwd())
def inside(p):
    p = os.path.realpath(p or '.')
    return p == root or p.startswith(root + os.sep)
paths = [p for p in sys.path if p and not inside(p)]
for e in os.environ.get('PYTHONPATH', '').split(os.pathsep):
    if e and not inside(e) and e not in paths:
        paths.append(e)
names = set(sys.builtin_module_names)
for m in pkgutil.iter_modules(paths):
    names.add(m[1])
for p in list(sys.path) + os.environ.get('PYTHONPATH', '').split(os.pathsep):
    if p and inside(p):
        names.add('/' + os.path.relpath(os.path.realpath(p), root))
sys.stdout.write('\n'.join(sorted(names)) + '\n')
`

// listEveryPython is a script that runs listModules with every Python of the image it can find: the
// one on PATH, and those of conda environments and other usual places, since the
// test command may activate another than the one on PATH (SWE-bench's images run
// their tests in a conda environment). What they list is taken together.
func listEveryPython() string {
	return `seen=
for py in $(command -v python3 python 2>/dev/null) /opt/*/bin/python3 /opt/*/envs/*/bin/python3 /usr/local/bin/python3 /root/.pyenv/versions/*/bin/python3; do
  [ -x "$py" ] || continue
  r=$(readlink -f "$py") || continue
  case " $seen " in *" $r "*) continue ;; esac
  seen="$seen $r"
  "$py" -I -c ` + quote(listModules) + ` || true
done
`
}

// checkBase returns the image's checked-out commit, after checking that it is the
// task's BaseCommit (when the task names one): a row whose base commit is another
// commit of the image's clone would be graded against another tree.
func checkBase(ctx context.Context, sb rollout.Sandbox, r *tasks.Repo) (string, error) {
	cmd := git + "rev-parse --verify HEAD"
	if r.BaseCommit != "" {
		cmd += " && { " + git + "rev-parse --verify --quiet " + quote(r.BaseCommit+"^{commit}") + " || echo missing; }"
	}
	out, err := runOut(ctx, sb, cmd)
	if err != nil {
		return "", fmt.Errorf("the image's repository: %w", err)
	}
	head, base, _ := strings.Cut(out, "\n")
	if r.BaseCommit == "" {
		return head, nil
	}
	switch base = strings.TrimSpace(base); {
	case base == "missing" || base == "":
		return "", fmt.Errorf("reward: the image's repository does not hold the task's base commit %s (is %s the task's image?)",
			r.BaseCommit, r.Image)
	case base != head:
		return "", fmt.Errorf("reward: the image's checked-out commit is %s, not the task's base commit %s (%s): the image %s was built for another commit",
			head, r.BaseCommit, base, r.Image)
	}
	return head, nil
}

// sectionSep separates the parts of one command's output: no NUL-terminated path git
// lists is "/".
const sectionSep = "\x00/\x00"

// readStart makes git in the prepared grading sandbox ignore attributes (see
// neutralAttributes) and reads the start commit and the [startState], in one command.
func readStart(ctx context.Context, gs rollout.Sandbox, r *tasks.Repo) (string, startState, error) {
	var st startState
	python := false
	switch tasks.CanonicalParser(r.LogParser) {
	case tasks.ParserPytest, tasks.ParserDjango, tasks.ParserSympy:
		python = true
	}
	script := `set -e
p=$(` + git + `rev-parse --git-path info/attributes)
mkdir -p "$(dirname "$p")"
printf '%s\n' '` + neutralAttributes + `' >"$p"
` + git + `rev-parse --verify HEAD
printf '` + `\0/\0` + `'
` + git + `ls-files -z -o --directory
printf '` + `\0/\0` + `'
` + git + `ls-files -z -- '*__init__.py'
printf '` + `\0/\0` + `'
`
	if python {
		script += listEveryPython()
	}
	out, err := listOut(ctx, gs, script, nil)
	if err != nil {
		return "", st, err
	}
	parts := strings.Split(string(out), sectionSep)
	if len(parts) != 4 {
		return "", st, fmt.Errorf("reading the start state: %d parts, want 4", len(parts))
	}
	start := strings.TrimSpace(parts[0])
	st.untracked = splitNUL([]byte(parts[1]))
	st.inits = map[string]bool{}
	for _, p := range splitNUL([]byte(parts[2])) {
		st.inits[p] = true
	}
	if !python {
		return start, st, nil
	}
	st.modules, st.pathDirs = map[string]bool{}, map[string]bool{}
	for name := range strings.SplitSeq(parts[3], "\n") {
		switch name = strings.TrimSpace(name); {
		case strings.HasPrefix(name, "/"):
			if dir := path.Clean(name[1:]); dir != "." && pathInside(dir) {
				st.pathDirs[dir] = true
			}
		case name != "":
			st.modules[name] = true
		}
	}
	if len(st.modules) == 0 {
		return "", st, fmt.Errorf("the image's Python (python3 or python, 3.4 or later) could not list the modules it provides")
	}
	return start, st, nil
}

// listOut runs a trusted command in the grading sandbox and returns its output (at
// most maxListing bytes); a failure is an error.
func listOut(ctx context.Context, gs rollout.Sandbox, cmd string, stdin []byte) ([]byte, error) {
	out, res, err := streamRun(ctx, gs, cmd, stdin, maxListing)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstLine(cmd), err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%s: exit %d: %s", firstLine(cmd), res.ExitCode, tail(res.Stderr))
	}
	return out, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func splitNUL(b []byte) []string {
	var out []string
	for p := range strings.SplitSeq(string(b), "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// guardTree checks, after the agent's diff went into the grading sandbox, every path
// that differs from the start as git itself lists it (tracked files changed or
// removed, and files that were not there), with no ignore rule applied: paths the
// rules of [RepoResult.Discarded] discard are put back as they were at the start, and
// so are modules the agent added in place of one the image provides, and changes to a
// pytest section of setup.cfg or pyproject.toml (the rest of the file is kept). It
// returns the paths it put back or changed and how many are test files. Nothing of the
// agent has run in gs yet, so what is read there is what git wrote.
func guardTree(ctx context.Context, gs rollout.Sandbox, startCommit string, st startState, testFiles []string) (discarded []string, testEdits int, err error) {
	script := "set -e\n" + git + "diff-index -z --name-only --no-renames HEAD --\nprintf '\\0/\\0'\n" +
		`f=$(mktemp); cat >"$f"; ` + git + `ls-files -z -o --exclude-from="$f"` + "\nprintf '\\0/\\0'\n"
	if st.modules != nil {
		// The packages: directories with an __init__.py Python would import (a
		// file, or a link to one), as git wrote them.
		script += `find . -path ./.git -prune -o -name __init__.py -xtype f -print0 2>/dev/null || true` + "\n"
	}
	out, err := listOut(ctx, gs, script, []byte(excludePatterns(st.untracked)))
	if err != nil {
		return nil, 0, err
	}
	parts := strings.Split(string(out), sectionSep)
	if len(parts) != 3 {
		return nil, 0, fmt.Errorf("listing the changed paths: %d parts, want 3", len(parts))
	}
	var pkgs []string
	for _, p := range splitNUL([]byte(parts[2])) {
		if dir := path.Dir(strings.TrimPrefix(p, "./")); dir != "." {
			pkgs = append(pkgs, dir)
		}
	}
	return guardPaths(ctx, gs, startCommit, st, testFiles, splitNUL([]byte(parts[0])), splitNUL([]byte(parts[1])), pkgs)
}

// guardPaths is guardTree's check of the tracked paths that changed and the paths
// that were added.
func guardPaths(ctx context.Context, gs rollout.Sandbox, startCommit string, st startState, testFiles, tracked, added, pkgs []string) (discarded []string, testEdits int, err error) {
	var revertTracked, revertAdded []string
	tree := newPackageTree(st, pkgs)
	note := func(p string, test bool) {
		discarded = append(discarded, p)
		if test {
			testEdits++
		}
	}
	check := func(p string, isNew bool) (revert bool, err error) {
		switch pathRule(p, testFiles) {
		case ruleTest:
			note(p, true)
			return true, nil
		case ruleOutside, ruleArtefact:
			note(p, false)
			return true, nil
		}
		if base := path.Base(p); base == "setup.cfg" || base == "pyproject.toml" {
			action, err := guardPytestConfig(ctx, gs, startCommit, p, isNew)
			if err != nil || action == configKept {
				return false, err
			}
			note(p, true)
			return action == configRestored, nil
		}
		if isNew && (p == "__init__.py" || tree.shadows(p, st)) {
			// A new __init__.py at the top makes the repository a package:
			// pytest then imports it while collecting, as it would a conftest.py.
			note(p, false)
			return true, nil
		}
		return false, nil
	}
	for _, p := range tracked {
		revert, err := check(p, false)
		if err != nil {
			return nil, 0, err
		}
		if revert {
			revertTracked = append(revertTracked, p)
		}
	}
	for _, p := range added {
		revert, err := check(p, true)
		if err != nil {
			return nil, 0, err
		}
		if revert {
			revertAdded = append(revertAdded, p)
		}
	}
	if len(revertTracked)+len(revertAdded) == 0 {
		return discarded, testEdits, nil
	}
	list := strings.Join(append(slices.Clone(revertAdded), revertTracked...), "\x00") + "\x00"
	if _, err := listOut(ctx, gs, "xargs -0 -r rm -rf --", []byte(list)); err != nil {
		return nil, 0, err
	}
	if len(revertTracked) > 0 {
		list = strings.Join(revertTracked, "\x00") + "\x00"
		if _, err := listOut(ctx, gs, "GIT_LITERAL_PATHSPECS=1 xargs -0 -r "+git+"checkout -q "+quote(startCommit)+" --", []byte(list)); err != nil {
			return nil, 0, err
		}
	}
	return discarded, testEdits, nil
}

// packageTree is the repository's directories that hold a package's __init__.py or
// are on the image's Python path, by path component, so that a path is checked in
// time linear in its length.
type packageTree struct {
	kids map[string]*packageTree
	// pkg: the directory has an __init__.py now; startPkg: it had a tracked one at
	// the start; onPath: it is on the image's Python path.
	pkg, startPkg, onPath bool
}

func newPackageTree(st startState, pkgs []string) *packageTree {
	root := &packageTree{}
	for _, dir := range pkgs {
		root.node(dir).pkg = true
	}
	for p := range st.inits {
		if dir := path.Dir(p); dir != "." {
			root.node(dir).startPkg = true
		}
	}
	for dir := range st.pathDirs {
		root.node(dir).onPath = true
	}
	return root
}

// node returns the node of dir, making the nodes on its way.
func (t *packageTree) node(dir string) *packageTree {
	n := t
	for c := range strings.SplitSeq(dir, "/") {
		k := n.kids[c]
		if k == nil {
			if n.kids == nil {
				n.kids = map[string]*packageTree{}
			}
			k = &packageTree{}
			n.kids[c] = k
		}
		n = k
	}
	return n
}

// shadows reports a path the agent added that Python could import in place of a
// top-level module the image provides (the test runner, its plugins, the standard
// library): a module file, or a package the agent made, named as that module, in a
// directory that is no package (the working directory, and any directory pytest or
// a .pth file may put on sys.path), or in a directory on the image's Python path
// whether it is a package or not.
func (t *packageTree) shadows(p string, st startState) bool {
	if st.modules == nil {
		return false
	}
	parts := strings.Split(p, "/")
	dir := t // the node of the directory parts[i] is in; nil once outside the tree
	for i, c := range parts {
		topLevel := dir == t || dir == nil || !dir.pkg || dir.onPath
		var child *packageTree
		if dir != nil {
			child = dir.kids[c]
		}
		switch {
		case !topLevel:
			// inside a package: imported as parent.c, no top-level name
		case i == len(parts)-1:
			mod, ok := moduleName(c)
			return ok && st.modules[mod]
		case st.modules[c] && child != nil && child.pkg && !child.startPkg:
			return true
		}
		dir = child
	}
	return false
}
