package reward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout"
)

// isolatedGit starts a shell script that runs git with a configuration of the
// library's own: a private GIT_DIR, index, HOME and attributes under $d (a fresh
// directory of the command's own /tmp), no system or global configuration, and no
// environment variable that could point git anywhere else. Nothing of the repository
// it reads (its .git/config, hooks, index, info/, .gitattributes, .gitignore) is
// read: only its object store, as an alternate, for the start commit.
const isolatedGit = `set -e
umask 077
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES \
  GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_EXTERNAL_DIFF GIT_DIFF_OPTS GIT_NAMESPACE \
  GIT_COMMON_DIR GIT_CEILING_DIRECTORIES GIT_ATTR_SOURCE GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS \
  GIT_ICASE_PATHSPECS GIT_REPLACE_REF_BASE GIT_GRAFT_FILE GIT_SHALLOW_FILE GIT_QUARANTINE_PATH GIT_TRACE
wt=$(pwd -P)
d=$(mktemp -d /tmp/agenticopd-git.XXXXXX)
export HOME="$d" XDG_CONFIG_HOME="$d" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
  GIT_NO_REPLACE_OBJECTS=1 GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0 GIT_LITERAL_PATHSPECS=1
git init -q --bare --template= "$d/git" >/dev/null
mkdir -p "$d/git/info" "$d/git/objects/info"
printf '%s\n' "$wt/.git/objects" >"$d/git/objects/info/alternates"
printf '%s\n' "` + neutralAttributes + `" >"$d/git/info/attributes"
export GIT_DIR="$d/git" GIT_WORK_TREE="$wt" GIT_INDEX_FILE="$d/index"
g() {
  git -c core.bare=false -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false \
    -c core.commitGraph=false -c core.autocrlf=false -c core.safecrlf=false -c core.fileMode=true \
    -c core.symlinks=true -c core.quotePath=true -c core.ignoreCase=false -c core.precomposeUnicode=false \
    -c core.splitIndex=false -c core.sparseCheckout=false -c diff.noprefix=false -c diff.relative=false \
    -c diff.mnemonicPrefix=false -c core.excludesFile=/dev/null "$@"
}
`

// neutralAttributes, in a repository's info/attributes (which take precedence over
// every .gitattributes file), leaves every attribute that changes what git reads from
// or writes to a work tree, or how it diffs, unspecified: no filter, no end-of-line or
// encoding conversion, no keyword expansion, no diff or merge driver.
const neutralAttributes = "* !text !eol !crlf !filter !ident !diff !merge !working-tree-encoding"

// agentDiff takes the agent's change in sb as a binary diff against startCommit, with
// git run by [isolatedGit]: a fresh index holds every file of the work tree, untracked
// and ignored ones included, except the paths startUntracked lists (what the image's
// work tree held untracked at the start, as git ls-files -o --directory lists it:
// build output of the image), and is diffed against the start commit's tree. The diff
// is read from the command's standard output, at most maxDiff bytes of it. Nested
// repositories (a directory with a .git of its own) are not taken; their paths are
// returned. The agent's processes are gone by then: every command's processes end
// with it (rollout.Starter), and sb's workspace is restored first when it can be
// ([rollout.Restorer]). Failures of sb (a workspace too deep or large to restore in
// time, the command could not run, git failed, the diff is too large) are
// errSolution: the agent can cause each.
func agentDiff(ctx context.Context, sb rollout.Sandbox, startCommit string, startUntracked []string, maxDiff int) (diff string, nested []string, err error) {
	if r, ok := sb.(rollout.Restorer); ok {
		if err := r.Restore(ctx); err != nil {
			if ctx.Err() != nil {
				return "", nil, ctx.Err()
			}
			if errors.Is(err, rollout.ErrRestoreBudget) {
				return "", nil, errSolution{fmt.Errorf("restore the agent's sandbox: %w", err)}
			}
			return "", nil, fmt.Errorf("restore the agent's sandbox: %w", err)
		}
	}
	script := isolatedGit + `cat >"$d/exclude"
g ls-files -z -o --exclude-from="$d/exclude" >"$d/files"
g update-index --add -z --stdin <"$d/files" 2>"$d/ignored" || { cat "$d/ignored" >&2; exit 1; }
grep '^Ignoring path ' "$d/ignored" >&2 || true
g diff-index --cached -p --binary --full-index --no-renames --no-color --no-ext-diff --no-textconv \
  --src-prefix=a/ --dst-prefix=b/ ` + startCommit + ` --
`
	out, res, err := streamRun(ctx, sb, script, []byte(excludePatterns(startUntracked)), maxDiff)
	switch {
	case errors.Is(err, errStreamOver):
		return "", nil, errSolution{fmt.Errorf("the diff has more than %d bytes (RepoOptions.MaxDiff)", maxDiff)}
	case errors.Is(err, errNoStream):
		return "", nil, err
	case err != nil:
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, errSolution{err}
	case res.TimedOut:
		return "", nil, errSolution{fmt.Errorf("git diff: timed out after %s", gitTimeout)}
	case res.ExitCode != 0:
		return "", nil, errSolution{fmt.Errorf("git diff: exit %d: %s", res.ExitCode, tail(res.Stderr))}
	}
	for line := range strings.SplitSeq(string(res.Stderr), "\n") {
		if p, ok := strings.CutPrefix(line, "Ignoring path "); ok {
			nested = append(nested, p)
		}
	}
	return string(out), nested, nil
}

// excludePatterns writes paths as gitignore patterns that match exactly them,
// anchored at the top of the work tree (a path ending in "/" is a directory). A path
// with a newline cannot be written as a pattern and is left out.
func excludePatterns(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		if p == "" || strings.ContainsAny(p, "\n\r") {
			continue
		}
		b.WriteByte('/')
		for i := 0; i < len(p); i++ {
			if strings.IndexByte(`\*?[]!# `, p[i]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(p[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	// errStreamOver: the command wrote more than the limit; it was killed.
	errStreamOver = errors.New("reward: output over its limit")
	// errNoStream: the sandbox cannot stream and the output was cut at its cap.
	errNoStream = errors.New("reward: the output was cut at the sandbox's output cap, and the sandbox " +
		"does not implement rollout.Starter (a wrapper must forward Start) to stream it")
)

// streamRun runs script in sb with stdin and returns its standard output, read as it
// is written up to limit bytes: a command that writes more is killed and
// errStreamOver returned. A sandbox without [rollout.Starter] runs it with Run, and
// an output cut at its cap is errNoStream.
func streamRun(ctx context.Context, sb rollout.Sandbox, script string, stdin []byte, limit int) ([]byte, rollout.CommandResult, error) {
	cmd := rollout.Command{Argv: []string{"/bin/sh", "-c", script}, Timeout: gitTimeout}
	st, ok := sb.(rollout.Starter)
	if !ok {
		cmd.Stdin = stdin
		res, err := sb.Run(ctx, cmd)
		switch {
		case err != nil:
			return nil, res, err
		case res.OutputTruncated || res.OutputKilled:
			return nil, res, errNoStream
		case len(res.Stdout) > limit:
			return nil, res, errStreamOver
		}
		return res.Stdout, res, nil
	}
	p, err := st.Start(ctx, cmd)
	if err != nil {
		return nil, rollout.CommandResult{}, err
	}
	go func() {
		w := p.Stdin()
		_, _ = w.Write(stdin) // a command that never reads its input fails on its own
		_ = w.Close()
	}()
	out, err := io.ReadAll(io.LimitReader(bufio.NewReaderSize(p.Stdout(), 64<<10), int64(limit)+1))
	over := len(out) > limit
	if over || err != nil {
		p.Kill()
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	res, werr := p.Wait()
	switch {
	case werr != nil:
		return nil, res, werr
	case over:
		return nil, res, errStreamOver
	case err != nil:
		return nil, res, err
	}
	return out, res, nil
}
