package reward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Repository-task defaults.
const (
	// DefaultTestTimeout bounds a repository task's test command when the task names
	// no timeout.
	DefaultTestTimeout = 15 * time.Minute
	// DefaultMaxDiff bounds the agent's diff; a larger one is the solution's fault.
	DefaultMaxDiff = 8 << 20
	// gitTimeout bounds each git step of grading.
	gitTimeout = 2 * time.Minute
)

// Repository-task rules, the rows of the correctness table for [tasks.Repo] tasks.
const (
	// RuleResolved: every FAIL_TO_PASS and PASS_TO_PASS test passed (C = 1.0).
	RuleResolved Rule = "resolved"
	// RuleUnresolved: the tests ran, and some FAIL_TO_PASS or PASS_TO_PASS test did
	// not pass, or the log was void: the test command failed while the log shows no
	// failure (C = 0.2).
	RuleUnresolved Rule = "unresolved"
	// RulePatchFailed: the agent's diff could not be taken from its sandbox, was too
	// large, or applies by none of the methods tried (C = 0.1).
	RulePatchFailed Rule = "patch_failed"
	// RuleTestsNotRun: the test command timed out, or its log names no test (C = 0.1).
	RuleTestsNotRun Rule = "tests_not_run"
)

// RepoOptions configures [VerifyRepo]. The zero value is the default.
type RepoOptions struct {
	// TestTimeout bounds the test command when the task's [tasks.Repo.TestTimeout] is
	// 0; 0 means DefaultTestTimeout.
	TestTimeout time.Duration
	// MaxDiff bounds the agent's diff in bytes; 0 means DefaultMaxDiff.
	MaxDiff int
	// MaxOutput is how many bytes of the test log the Verification keeps; 0 means
	// DefaultMaxOutput.
	MaxOutput int
}

// RepoResult is what grading a repository task found; [Verification.Repo].
type RepoResult struct {
	// Resolved reports that every FAIL_TO_PASS and PASS_TO_PASS test passed.
	Resolved bool
	// F2PRate and P2PRate are the fractions of each list that passed (P2PRate is 1
	// for an empty PASS_TO_PASS list).
	F2PRate, P2PRate float64
	// F2PFailing and P2PFailing are the tests of each list that did not pass.
	F2PFailing, P2PFailing []string
	// Discarded are the files whose changes were left out of the agent's diff or put
	// back after it was applied: the test files of the task, and any file a test
	// runner would load as a test (conftest.py anywhere, files in or named tests/,
	// test/ or testing/, test_*.py, *_test.py) or that configures the run (pytest.ini,
	// .pytest.ini, pytest.toml, .pytest.toml, tox.ini, .gitattributes, sitecustomize,
	// usercustomize), whether the agent added or edited it; setup.cfg and
	// pyproject.toml files whose pytest sections the agent changed (those sections
	// put back, the rest of the file kept); modules the agent added in place of one
	// the image provides; files outside the repository or in .git; build output and
	// packaging metadata (__pycache__, *.pyc, *.egg-info, *.dist-info, .pytest_cache);
	// nested repositories (with a trailing slash).
	Discarded []string
	// TestFileEdits counts the files of Discarded that are test files (those the test
	// patch touches, hidden files, and test files the agent added).
	TestFileEdits int
	// Applied names how the diff went in: "empty" or "git apply"; "" when it did
	// not.
	Applied string
	// Diff is the agent's diff as applied (after discarding), cut to MaxOutput.
	Diff string
	// LogVoid reports that the log was voided: the test command failed while the log
	// shows no failed test (a planted plugin can print PASSED lines).
	LogVoid bool
}

// repoIdent gives git and the grading commits a fixed identity and date, so the setup
// commit of a task has the same hash in every sandbox.
const repoIdent = "GIT_AUTHOR_NAME=agenticopd GIT_AUTHOR_EMAIL=agenticopd@localhost " +
	"GIT_COMMITTER_NAME=agenticopd GIT_COMMITTER_EMAIL=agenticopd@localhost " +
	"GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' "

// git runs git in the repository with the agent's configuration neutralised.
const git = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.directory='*' -c core.fileMode=false "

// PrepareRepo gets a fresh sandbox of a repository task's image ready: the task's
// Setup patch is applied and its HiddenFiles removed, and whatever the work tree then
// holds beyond its HEAD (the setup, and files the image left untracked) is committed
// with a fixed identity and date, so that the commit's hash is the same in every
// sandbox of the image and the agent's change is taken against exactly the state it
// started from. A clean work tree without setup gets no commit. First, the image's
// checked-out commit must be the task's BaseCommit when the task names one (an image
// whose clone holds the base commit elsewhere than at HEAD would be graded against
// another tree). The agent's sandbox
// gets it before the agent starts, and [VerifyRepo] does it in its grading sandbox.
// A failure is an error: no agent action can cause it.
func PrepareRepo(ctx context.Context, sb rollout.Sandbox, r *tasks.Repo) error {
	_, err := prepareRepo(ctx, sb, r)
	return err
}

// prepareRepo is PrepareRepo; it returns the image's checked-out commit.
func prepareRepo(ctx context.Context, sb rollout.Sandbox, r *tasks.Repo) (string, error) {
	head, err := checkBase(ctx, sb, r)
	if err != nil {
		return "", err
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	if r.Setup != "" {
		script.WriteString(git + "apply --whitespace=nowarn -\n")
	}
	for _, f := range r.HiddenFiles {
		fmt.Fprintf(&script, "rm -f -- %s\n", quote(f))
	}
	script.WriteString(repoIdent + git + "add -A\n")
	script.WriteString(git + "diff --cached --quiet || " + repoIdent + git + "commit -q --no-verify -m 'task start'\n")
	res, err := sb.Run(ctx, rollout.Command{Argv: []string{"/bin/sh", "-c", script.String()}, Stdin: []byte(r.Setup), Timeout: gitTimeout})
	if err != nil {
		return "", fmt.Errorf("reward: prepare repository: %w", err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("reward: prepare repository: exit %d: %s", res.ExitCode, tail(res.Stderr))
	}
	return head, nil
}

// VerifyRepo grades a repository task ([tasks.Task.Repo]) whose agent worked in sb.
// fresh makes a fresh sandbox of the task's image (with its network setting); it is
// called once, and that sandbox is closed before VerifyRepo returns.
//
// In order: the grading sandbox is prepared ([PrepareRepo], which checks that the
// image's checked-out commit is the task's BaseCommit) and its HEAD read, the start
// commit; in sb, the agent's change is taken by the library's own git as a binary diff
// of the whole work tree (untracked and ignored files included) against that commit,
// read from the command's output under MaxDiff; the diff's files that the grading
// owns or that no fix needs are discarded (see [RepoResult.Discarded]); the rest is
// applied in the grading sandbox with git apply, and a guard there puts back whatever
// the agent's change may not touch, read from git itself (see the package
// documentation, Repository tasks); the test files are restored from the image's
// commit and the test patch applied; the test command runs with its timeout and its
// log is parsed with the task's parser. The agent's code is never run before that
// command, and nothing it printed counts.
//
// The grade follows SWE-bench's v5 rules: a test passes when its status is PASSED or
// XFAIL; a FAIL_TO_PASS test that is skipped or missing has not passed (a skipped
// PASS_TO_PASS test is no regression); a failed test command whose log shows no
// failed test voids the log. The table: resolved 1.0, tests ran but not resolved 0.2,
// the diff cannot be taken or applied or the tests did not run 0.1. A failure of the
// grading sandbox, of fresh, or of the test patch (the task's data) is an error with
// [RuleSandboxError] and correctness 0; so is a task without FAIL_TO_PASS tests
// ([ErrNoTests]). A failure in sb, while the grading sandbox works, is the
// solution's ([Verification.SandboxFault]).
func VerifyRepo(ctx context.Context, sb rollout.Sandbox, fresh rollout.SandboxFactory, t tasks.Task, opts RepoOptions) (Verification, error) {
	start := time.Now()
	if t.Repo == nil || len(t.Repo.FailToPass) == 0 {
		return Verification{Rule: RuleNoTests}, fmt.Errorf("%w (task %q has no FAIL_TO_PASS tests)", ErrNoTests, t.ID)
	}
	opts = opts.withDefaults()
	v, err := verifyRepo(ctx, sb, fresh, t, opts)
	v.Duration = time.Since(start)
	if err != nil {
		v.Correctness, v.Rule = 0, RuleSandboxError
		if v.Reason == "" {
			v.Reason = err.Error()
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		return v, fmt.Errorf("reward: verify %q: %w", t.ID, err)
	}
	return v, nil
}

func (o RepoOptions) withDefaults() RepoOptions {
	if o.TestTimeout <= 0 {
		o.TestTimeout = DefaultTestTimeout
	}
	if o.MaxDiff <= 0 {
		o.MaxDiff = DefaultMaxDiff
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	return o
}

// errSolution marks a failure of the agent's sandbox.
type errSolution struct{ err error }

func (e errSolution) Error() string { return e.err.Error() }

func verifyRepo(ctx context.Context, sb rollout.Sandbox, fresh rollout.SandboxFactory, t tasks.Task, opts RepoOptions) (Verification, error) {
	r := t.Repo
	res := &RepoResult{}
	v := Verification{Repo: res}
	gs, err := fresh.NewSandbox(ctx)
	if err != nil {
		return v, fmt.Errorf("grading sandbox: %w", err)
	}
	defer gs.Close()
	imageHead, err := prepareRepo(ctx, gs, r)
	if err != nil {
		return v, err
	}
	startCommit, st, err := readStart(ctx, gs, r)
	if err != nil {
		return v, fmt.Errorf("grading sandbox: %w", err)
	}

	diff, nested, err := agentDiff(ctx, sb, startCommit, st.untracked, opts.MaxDiff)
	var sol errSolution
	switch {
	case errors.As(err, &sol):
		v.Correctness, v.Rule, v.SandboxFault = 0.1, RulePatchFailed, true
		v.Reason = "the agent's change could not be taken from its sandbox: " + sol.Error()
		return v, nil
	case err != nil:
		return v, err
	}
	kept, discarded, testEdits, err := filterDiff(ctx, diff, r.TestFiles())
	if err != nil {
		return v, err
	}
	res.Discarded, res.TestFileEdits = append(discarded, nested...), testEdits
	res.Diff = capOutput(kept, opts.MaxOutput)

	applied, err := applyDiff(ctx, gs, kept)
	if err != nil {
		return v, fmt.Errorf("grading sandbox: apply: %w", err)
	}
	if applied == "" {
		v.Correctness, v.Rule = 0.1, RulePatchFailed
		v.Reason = "the agent's diff does not apply (git apply --check refuses it)"
		return v, nil
	}
	res.Applied = applied
	more, moreTests, err := guardTree(ctx, gs, startCommit, st, r.TestFiles())
	if err != nil {
		return v, fmt.Errorf("grading sandbox: %w", err)
	}
	seen := make(map[string]bool, len(res.Discarded))
	for _, p := range res.Discarded {
		seen[p] = true
	}
	for _, p := range more {
		if !seen[p] {
			seen[p] = true
			res.Discarded = append(res.Discarded, p)
		}
	}
	res.TestFileEdits += moreTests
	if err := applyTests(ctx, gs, r, imageHead); err != nil {
		return v, err
	}

	timeout := r.TestTimeout
	if timeout <= 0 {
		timeout = opts.TestTimeout
	}
	logName := ".git/agenticopd-test.log"
	run, err := gs.Run(ctx, rollout.Command{Shell: "(" + r.TestCommand + ") >" + logName + " 2>&1 </dev/null", Timeout: timeout})
	if err != nil {
		return v, fmt.Errorf("grading sandbox: test command: %w", err)
	}
	v.ExitCode, v.TimedOut, v.Unconfined = run.ExitCode, run.TimedOut, run.Unconfined
	log := readLog(ctx, gs, logName)
	v.Output = capOutput(log.text, opts.MaxOutput)
	if run.TimedOut {
		v.Correctness, v.Rule = 0.1, RuleTestsNotRun
		v.Reason = fmt.Sprintf("the test command timed out after %s", timeout)
		return v, nil
	}
	return v, gradeLog(&v, r, log, run.ExitCode)
}

// runOut runs a shell command in sb and returns its trimmed standard output; a
// non-zero exit is an error.
func runOut(ctx context.Context, sb rollout.Sandbox, cmd string) (string, error) {
	res, err := sb.Run(ctx, rollout.Command{Shell: cmd, Timeout: gitTimeout})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s: exit %d: %s", cmd, res.ExitCode, tail(res.Stderr))
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// applyDiff applies diff in gs with git apply; it returns "git apply", "empty" for an
// empty diff, or "" when git apply refuses it. The diff is the library's own, taken
// against the very start commit gs holds, so no fuzzier method is tried: a diff git
// apply refuses was made so by the agent (its object store, say).
func applyDiff(ctx context.Context, gs rollout.Sandbox, diff string) (string, error) {
	if strings.TrimSpace(diff) == "" {
		return "empty", nil
	}
	res, err := gs.Run(ctx, rollout.Command{Shell: git + "apply --whitespace=nowarn -", Stdin: []byte(diff), Timeout: gitTimeout})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", nil
	}
	return "git apply", nil
}

// applyTests restores the task's test files from the image's commit (removing those
// it does not hold) and applies the test patch. A failure is the task's, not the
// agent's: its diff did not touch those files.
func applyTests(ctx context.Context, gs rollout.Sandbox, r *tasks.Repo, imageHead string) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, f := range r.TestFiles() {
		fmt.Fprintf(&script, "if %scat-file -e %s:%s 2>/dev/null; then %scheckout -q %s -- %s; else rm -rf -- %s; fi\n",
			git, quote(imageHead), quote(f), git, quote(imageHead), quote(f), quote(f))
	}
	if r.TestPatch != "" {
		script.WriteString(git + "apply --verbose --whitespace=nowarn -\n")
	}
	res, err := gs.Run(ctx, rollout.Command{Argv: []string{"/bin/sh", "-c", script.String()}, Stdin: []byte(r.TestPatch), Timeout: gitTimeout})
	if err != nil {
		return fmt.Errorf("grading sandbox: test patch: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the task's test patch does not apply to the image's repository (a broken task): exit %d: %s",
			res.ExitCode, tail(res.Stderr))
	}
	return nil
}

// quote quotes s for a POSIX shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
