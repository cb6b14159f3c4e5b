package reward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Verification defaults.
const (
	// DefaultVerifyTimeout bounds a verification, as in the original.
	DefaultVerifyTimeout = 30 * time.Second
	// DefaultPython is the interpreter the tests and the solution run with.
	DefaultPython = "python3"
	// DefaultMaxOutput is how much output a Verification keeps, per process.
	DefaultMaxOutput = 16 << 10
	// MaxMessage bounds one message between the test process and the solution
	// process (a request or a reply, encoded, its newline not counted): a message of
	// MaxMessage bytes passes on both sides, as the harness gets this constant from
	// Go. A longer reply is a protocol fault; a longer request raises OverflowError in
	// the tests and the Verification's Reason names the limit.
	MaxMessage = 16 << 20
	// MaxDepth is how deeply containers may nest in a value that crosses between the
	// test process and the solution process. A deeper value returned by the solution
	// crosses as a handle at that depth; one the tests pass raises TypeError there.
	MaxDepth = 10000
)

var (
	// ErrNoTests is returned by [Verify] for a task without anything to verify with:
	// such a task's Verification has correctness 0.
	ErrNoTests = errors.New("reward: task has no tests to verify with")
	// ErrNoStarter is wrapped by the error [Verify] returns when a sandbox it needs to
	// talk to does not implement [rollout.Starter]: such a sandbox cannot run the
	// tests apart from the solution, and nothing is scored (C = 0).
	ErrNoStarter = errors.New("reward: the sandbox does not implement rollout.Starter, which verification needs; " +
		"use the sandbox of package rollout/sandbox/bwrap, or forward Start in a wrapper")
)

// Rule names the row of the correctness table that decided a [Verification].
type Rule string

// Correctness rules.
const (
	// RulePassed: the tests ran to their end, the test process exited with 0 and
	// wrote "passed"; or every input/output case gave its output (C = 1.0).
	RulePassed Rule = "passed"
	// RuleExitZero: the tests ran to their end and exited with 0 without "passed"
	// (C = 0.8).
	RuleExitZero Rule = "exit_zero"
	// RuleAssertion: "assert" and "error" in the test output, as an AssertionError
	// prints (C = 0.2).
	RuleAssertion Rule = "assertion"
	// RuleWrongOutput: an input/output case ran and wrote the wrong output (C = 0.2,
	// a failed assertion).
	RuleWrongOutput Rule = "wrong_output"
	// RuleFailed: any other failure: crash, syntax error, missing solution, timeout
	// (C = 0.1).
	RuleFailed Rule = "failed"
	// RuleIncomplete: the test process exited with 0, but its scripts did not run to
	// their end (C = 0.1).
	RuleIncomplete Rule = "incomplete"
	// RuleSolutionFault: the solution process broke the conversation: it ended while
	// the tests waited for it (os._exit, sys.exit, a crash), or sent something that
	// is not a well-formed answer; or the rollout's sandbox could not run it at all
	// because of what the agent did there ([Verification.SandboxFault]) (C = 0.1,
	// whatever the tests printed).
	RuleSolutionFault Rule = "solution_fault"
	// RuleSandboxError: a sandbox could not run the tests, for a reason no agent
	// can cause (C = 0.0; [Verify] returns an error with it).
	RuleSandboxError Rule = "sandbox_error"
	// RuleNoTests: the task has no tests (C = 0.0).
	RuleNoTests Rule = "no_tests"
)

// VerifyOptions configures [Verify]. The zero value is the default.
type VerifyOptions struct {
	// Timeout bounds the test and solution processes; 0 means DefaultVerifyTimeout.
	// The input/output cases have Timeout + len(Cases)×CaseBudget together.
	Timeout time.Duration
	// CaseTimeout bounds one input/output case; 0 means DefaultCaseTimeout.
	CaseTimeout time.Duration
	// CaseBudget is what each input/output case adds to the time the cases have
	// together; 0 means DefaultCaseBudget.
	CaseBudget time.Duration
	// Python is the interpreter; "" means DefaultPython.
	Python string
	// MaxOutput is how many bytes of each process's output the Verification keeps
	// (head and tail, with the cut marked); 0 means DefaultMaxOutput. The rules always
	// see the whole output the sandbox returned.
	MaxOutput int
}

// Verification is the result of verifying a rollout's solution.
type Verification struct {
	// Correctness is C, from the table in the package doc.
	Correctness float64
	// Rule is the row of the table that decided Correctness.
	Rule Rule
	// Reason says in words why Rule applied.
	Reason string
	// ExitCode is the test process's exit status (124 on timeout); for input/output
	// cases, that of the last case run.
	ExitCode int
	// TimedOut reports that the verification hit its timeout.
	TimedOut bool
	// Output is the test process's output (its stdout and stderr together), cut to
	// MaxOutput; for input/output cases, a report of the first failing case.
	Output string
	// SolutionOutput is what the solution process printed, cut to MaxOutput. It never
	// counts for the rules.
	SolutionOutput string
	// OutputTruncated reports that the sandbox cut the test output at its own cap (or
	// killed the run for writing too much), so a "passed" line may not have been seen.
	OutputTruncated bool
	// Completed reports that every test script ran to its end, as the test process
	// said on the channel only it holds, and that every input/output case passed.
	Completed bool
	// Calls counts the requests the tests made to the solution process.
	Calls int
	// Cases and CasesPassed count the input/output cases and those that passed (the
	// cases stop at the first failure).
	Cases, CasesPassed int
	// Unconfined reports that a sandbox ran the tests or the solution without
	// isolation.
	Unconfined bool
	// SandboxFault reports that the rollout's sandbox could not run the solution
	// while a fresh sandbox of the same factory could (the agent filled its memory or
	// workspace, broke the workspace): the verification is [RuleSolutionFault]
	// (C = 0.1) and Reason holds the sandbox's error.
	SandboxFault bool
	// Duration is the verification's wall time.
	Duration time.Duration
	// Repo is what grading a repository task found ([VerifyRepo]); nil for other tasks.
	Repo *RepoResult
}

// Passed reports whether the verification counts as a pass for pass-rate metrics (C ≥ 0.8,
// as in the original).
func (v Verification) Passed() bool { return v.Correctness >= 0.8 }

// Verify checks the solution a rollout left in sb against t's tests and computes the
// correctness with the table of the package doc.
//
// Test code (t.TestCode, then t.HiddenTests) runs in a fresh sandbox made by tests for
// this call and closed before it returns: the test process never loads the agent's
// code, and the solution process, started in sb, never sees the tests. Both sandboxes
// must implement [rollout.Starter] (else [ErrNoStarter]). The package doc describes the
// protocol between them. Input/output cases (t.Cases) run solution.py in sb once per
// case, also started through [rollout.Starter]; tests may be nil for a task that has
// only cases. A task with both gets the lower of the two verdicts. A case whose
// expected output is longer than [MaxCaseOutput] gives an error.
//
// Before anything runs in sb, a sandbox that implements [rollout.Restorer] gets its
// workspace restored (permissions the agent took away are given back); a restore
// that runs out of its budget ([rollout.ErrRestoreBudget]: a tree too deep or too
// large to walk in time) is the solution's fault, [RuleSolutionFault].
//
// A task without tests gives [ErrNoTests]. A failure of the rollout's sandbox sb (it
// could not start or run the solution: its memory or workspace full, its workspace
// broken) is the solution's fault when a control run in a fresh sandbox of tests
// passes (with tests nil, a task with cases only, there is no control run): the
// Verification is [RuleSolutionFault] (C = 0.1) with
// [Verification.SandboxFault] set, and no error, since the agent's own actions can
// cause it. Any other sandbox failure (the tests' sandbox, the factory, the control
// run, a sandbox without Start) gives an error and a Verification with
// [RuleSandboxError] and correctness 0, so that callers may still score the rollout;
// a solution or test run that fails, crashes or times out is not an error. When ctx
// ends, the error is ctx's.
func Verify(ctx context.Context, sb rollout.Sandbox, tests rollout.SandboxFactory, t tasks.Task, opts VerifyOptions) (Verification, error) {
	if !t.HasTests() {
		return Verification{Rule: RuleNoTests}, fmt.Errorf("%w (task %q)", ErrNoTests, t.ID)
	}
	opts = opts.withDefaults()
	start := time.Now()
	if r, ok := sb.(rollout.Restorer); ok {
		if err := r.Restore(ctx); err != nil {
			if errors.Is(err, rollout.ErrRestoreBudget) && ctx.Err() == nil {
				// What the workspace holds is the agent's doing (a tree too deep or too
				// large to walk in time): no fresh sandbox could show otherwise.
				return Verification{Correctness: 0.1, Rule: RuleSolutionFault, SandboxFault: true,
					Reason: "the agent's workspace could not be restored: " + err.Error(), Duration: time.Since(start)}, nil
			}
			return Verification{Rule: RuleSandboxError, Reason: err.Error()}, fmt.Errorf("reward: verify %q: %w", t.ID, err)
		}
	}
	w, parent, factory := &watch{}, ctx, tests
	sb, tests = w.solution(sb), w.tests(tests)
	scripts := t.TestCode != "" || t.HiddenTests != ""
	limit := 10 * time.Second // the sandboxes' own timeouts come first
	if scripts {
		limit += opts.Timeout
	}
	if len(t.Cases) > 0 {
		limit += casesBudget(len(t.Cases), opts)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var v Verification
	var err error
	if scripts {
		v, err = verifyScripts(ctx, sb, tests, t, opts)
	}
	if err == nil && len(t.Cases) > 0 {
		var cv Verification
		cv, err = verifyCases(ctx, sb, t.Cases, opts)
		if err == nil && scripts {
			cv = lower(v, cv)
		}
		v = cv
	}
	if err != nil && w.solutionsFault(parent, err, factory, opts) {
		return Verification{
			Correctness: 0.1, Rule: RuleSolutionFault, SandboxFault: true, Unconfined: v.Unconfined,
			Reason:   "the rollout's sandbox could not run the solution, a fresh one could: " + err.Error(),
			Duration: time.Since(start),
		}, nil
	}
	v.Duration = time.Since(start)
	if err != nil {
		v.Correctness, v.Rule = 0, RuleSandboxError
		if v.Reason == "" {
			v.Reason = err.Error()
		}
		return v, fmt.Errorf("reward: verify %q: %w", t.ID, err)
	}
	return v, nil
}

// lower combines the verdicts of a task's test code and of its input/output cases:
// the lower correctness decides (the test code's on a tie), and the Verification
// keeps the facts of both.
func lower(scripts, cases Verification) Verification {
	v := scripts
	if cases.Correctness < scripts.Correctness {
		v = cases
	}
	v.Reason = fmt.Sprintf("tests: %s; cases: %s", scripts.Reason, cases.Reason)
	v.Completed = scripts.Completed && cases.Completed
	v.Calls = scripts.Calls
	v.Cases, v.CasesPassed = cases.Cases, cases.CasesPassed
	v.Unconfined = scripts.Unconfined || cases.Unconfined
	v.TimedOut = scripts.TimedOut || cases.TimedOut
	v.OutputTruncated = scripts.OutputTruncated || cases.OutputTruncated
	return v
}

func (o VerifyOptions) withDefaults() VerifyOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultVerifyTimeout
	}
	if o.CaseTimeout <= 0 {
		o.CaseTimeout = DefaultCaseTimeout
	}
	if o.CaseBudget <= 0 {
		o.CaseBudget = DefaultCaseBudget
	}
	if o.Python == "" {
		o.Python = DefaultPython
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	return o
}

// Correctness maps a test run to C with the original's table (see the package doc):
// the rules are tried in order on the exit code and the lower-cased output. It is the
// bare table: [Verify] also requires an exit code 0 to come with the test process's
// report that its scripts ran to their end (else [RuleIncomplete]).
func Correctness(exitCode int, output string) (float64, Rule) {
	out := strings.ToLower(output)
	switch {
	case exitCode == 0 && strings.Contains(out, "passed"):
		return 1.0, RulePassed
	case exitCode == 0:
		return 0.8, RuleExitZero
	case strings.Contains(out, "assert") && strings.Contains(out, "error"):
		return 0.2, RuleAssertion
	default:
		return 0.1, RuleFailed
	}
}

// capOutput keeps the head and the tail of s, max bytes in all, marking the cut.
func capOutput(s string, max int) string {
	if len(s) <= max {
		return s
	}
	marker := fmt.Sprintf("\n…[%d bytes cut]…\n", len(s)-max)
	head := max / 2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - (max - max/2)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + marker + s[tail:]
}
