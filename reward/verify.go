package reward

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Verification defaults.
const (
	// DefaultVerifyTimeout bounds the test run, as in the original.
	DefaultVerifyTimeout = 30 * time.Second
	// DefaultPython is the interpreter the tests run with.
	DefaultPython = "python3"
	// DefaultMaxOutput is how much test output a Verification keeps.
	DefaultMaxOutput = 16 << 10
)

// ErrNoTests is returned by [Verify] for a task without test code: such a task cannot be
// verified, and its Verification has correctness 0.
var ErrNoTests = errors.New("reward: task has no test code to verify with")

// Rule names the row of the correctness table that decided a [Verification].
type Rule string

// Correctness rules, in the order they are tried.
const (
	// RulePassed: exit code 0 and "passed" in the output (C = 1.0).
	RulePassed Rule = "passed"
	// RuleExitZero: exit code 0 without "passed" (C = 0.8).
	RuleExitZero Rule = "exit_zero"
	// RuleAssertion: "assert" and "error" in the output, as an AssertionError prints (C = 0.2).
	RuleAssertion Rule = "assertion"
	// RuleFailed: any other failure: crash, syntax error, missing solution, timeout (C = 0.1).
	RuleFailed Rule = "failed"
	// RuleIncomplete: exit code 0, but the canonical tests did not run to their end: code
	// the tests imported ended the process early, e.g. with os._exit(0) or sys.exit(0)
	// from solution.py (C = 0.1, as any other failed run).
	RuleIncomplete Rule = "incomplete"
	// RuleSandboxError: the sandbox could not run the tests (C = 0.0).
	RuleSandboxError Rule = "sandbox_error"
	// RuleNoTests: the task has no test code (C = 0.0).
	RuleNoTests Rule = "no_tests"
)

// VerifyOptions configures [Verify]. The zero value is the default.
type VerifyOptions struct {
	// Timeout bounds the test run; 0 means DefaultVerifyTimeout.
	Timeout time.Duration
	// Python is the interpreter; "" means DefaultPython.
	Python string
	// MaxOutput is how many bytes of output the Verification keeps (head and tail,
	// with the cut marked); 0 means DefaultMaxOutput. The rules always see the whole
	// output the sandbox returned.
	MaxOutput int
}

// Verification is the result of running a task's canonical tests.
type Verification struct {
	// Correctness is C, from the table in the package doc.
	Correctness float64
	// Rule is the row of the table that decided Correctness.
	Rule Rule
	// ExitCode is the test run's exit status (124 on timeout).
	ExitCode int
	// TimedOut reports that the run hit the timeout.
	TimedOut bool
	// Output is the run's stdout followed by its stderr, cut to MaxOutput.
	Output string
	// OutputTruncated reports that the sandbox cut the output at its own cap (or
	// killed the run for writing too much), so a "passed" line may not have been seen.
	OutputTruncated bool
	// Completed reports that the canonical tests ran to their end: the test script
	// returned, or exited with status 0 from its own code (as unittest.main does).
	Completed bool
	// TestFile is the workspace file the tests were written to.
	TestFile string
	// Unconfined reports that the sandbox ran the tests without isolation.
	Unconfined bool
	// Duration is the run's wall time.
	Duration time.Duration
}

// Passed reports whether the verification counts as a pass for pass-rate metrics (C ≥ 0.8,
// as in the original).
func (v Verification) Passed() bool { return v.Correctness >= 0.8 }

// Verify writes t.TestCode to a new file in sb's workspace, named _verify_<random
// hex>.py so that the agent cannot have prepared a file of that name, runs it with
// python3 in the workspace root, and computes the correctness with [Correctness].
//
// The interpreter runs in isolated mode (-I: no PYTHON* variables, no user site
// directory, the script's directory not first on the module path) with the workspace
// appended to the module path, so `from solution import …` finds the agent's
// solution.py while files the agent left in the workspace cannot shadow standard
// modules.
//
// The agent's code runs inside the test process when the tests import it, so the exit
// status alone does not prove that the tests ran: a solution.py that prints "All tests
// passed!" and calls os._exit(0) or sys.exit(0) would otherwise score 1.0. Verify
// therefore gives the test process a random token on its standard input, which a small
// runner reads before any test code runs and writes to a second file of the same fresh
// name (_verify_<hex>.ok) only when the test script has run to its end: it returned, or
// raised SystemExit with status 0 from the script's own code or from the standard
// library it called (unittest.main), not from code it imported. An exit status 0
// without the token is [RuleIncomplete] (C = 0.1). This stops the generic early-exit
// fakes; code written against this runner could still find the token in the process's
// memory, and an object that compares equal to everything still passes `==` asserts:
// the sandbox, not the verifier, confines what the agent's code can do, and the tests
// decide what they check.
//
// The sandbox must pass [rollout.Command.Stdin] to the command, as the Sandbox contract
// says; Verify detects one that does not and returns an error rather than scoring every
// run as incomplete.
//
// A task without test code gives [ErrNoTests]. A sandbox failure gives an error and a
// Verification with [RuleSandboxError] and correctness 0, so that callers may still
// score the rollout; a test run that fails, crashes or times out is not an error.
func Verify(ctx context.Context, sb rollout.Sandbox, t tasks.Task, opts VerifyOptions) (Verification, error) {
	if !t.HasTests() {
		return Verification{Rule: RuleNoTests}, fmt.Errorf("%w (task %q)", ErrNoTests, t.ID)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	python := opts.Python
	if python == "" {
		python = DefaultPython
	}
	maxOut := opts.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	var nonce [12]byte
	var secret [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Verification{Rule: RuleSandboxError}, fmt.Errorf("reward: verify: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Verification{Rule: RuleSandboxError}, fmt.Errorf("reward: verify: %w", err)
	}
	base := "_verify_" + hex.EncodeToString(nonce[:])
	name, done := base+".py", base+".ok"
	token := []byte(hex.EncodeToString(secret[:]))
	v := Verification{Rule: RuleSandboxError, TestFile: name}
	if err := sb.WriteFile(name, []byte(t.TestCode)); err != nil {
		return v, fmt.Errorf("reward: verify %q: write tests: %w", t.ID, err)
	}
	// The completion file is created empty from the host, so that the runner only has
	// to write into it: that still works when the agent left the workspace directory
	// read-only for the sandboxed code.
	if err := sb.WriteFile(done, nil); err != nil {
		return v, fmt.Errorf("reward: verify %q: write completion file: %w", t.ID, err)
	}
	res, err := sb.Run(ctx, rollout.Command{
		Argv:    []string{python, "-I", "-B", "-c", bootstrap, name, done},
		Timeout: timeout,
		Stdin:   token,
	})
	if err != nil {
		return v, fmt.Errorf("reward: verify %q: run tests: %w", t.ID, err)
	}
	out := string(res.Stdout) + string(res.Stderr)
	v.Completed, err = hasToken(sb, done, token)
	if err != nil {
		return v, fmt.Errorf("reward: verify %q: %w", t.ID, err)
	}
	if res.ExitCode == 0 && !v.Completed {
		v.Correctness, v.Rule = 0.1, RuleIncomplete
	} else {
		v.Correctness, v.Rule = Correctness(res.ExitCode, out)
	}
	v.ExitCode = res.ExitCode
	v.TimedOut = res.TimedOut
	v.Unconfined = res.Unconfined
	v.OutputTruncated = res.OutputTruncated || res.OutputKilled
	v.Duration = res.Duration
	v.Output = capOutput(out, maxOut)
	return v, nil
}

// tokenPrefix starts what the runner writes to the completion file, so that a runner
// that read no token is told apart from one that never finished.
const tokenPrefix = "ok:"

// hasToken reports whether the workspace file name is a regular file holding exactly
// tokenPrefix and token. It is checked with a Stat first so that a planted FIFO or huge
// file is never read. A file holding only the prefix means the runner read no token:
// the sandbox did not pass Command.Stdin to the command, and no run could ever count as
// complete.
func hasToken(sb rollout.Sandbox, name string, token []byte) (bool, error) {
	fi, err := fs.Stat(sb.FS(), name)
	if err != nil || !fi.Mode().IsRegular() {
		return false, nil
	}
	want := append([]byte(tokenPrefix), token...)
	if fi.Size() != int64(len(tokenPrefix)) && fi.Size() != int64(len(want)) {
		return false, nil
	}
	data, err := sb.ReadFile(name)
	if err != nil {
		return false, nil
	}
	if string(data) == tokenPrefix {
		return false, errors.New("the sandbox did not pass Command.Stdin to the test process; Verify needs it")
	}
	return subtle.ConstantTimeCompare(data, want) == 1, nil
}

// bootstrap runs the test file given as the first argument as __main__, with the
// workspace (the current directory) appended to the module path. Before any test code
// runs it reads the completion token from standard input; it writes tokenPrefix and the
// token to the file given as the second argument (created empty by Verify) only when
// the script ran to its end: it returned, or raised SystemExit with status 0 (None, 0
// or False) whose innermost frame outside the standard library is the script's own code
// (the script's sys.exit, exit() or unittest.main), not code it imported.
const bootstrap = `import os, runpy, sys
def _verify():
    token = sys.stdin.buffer.read()
    test = os.path.abspath(sys.argv[1])
    done = os.path.abspath(sys.argv[2])
    stdlib = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
    sys.path.append(os.getcwd())
    sys.argv = [test]
    def finish():
        with open(done, "wb") as f:
            f.write(b"` + tokenPrefix + `" + token)
    def from_script(tb):
        last = None
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if not name.startswith("<") and not name.startswith(stdlib):
                last = name
            tb = tb.tb_next
        return last == test
    try:
        runpy.run_path(test, run_name="__main__")
    except SystemExit as e:
        if from_script(e.__traceback__) and (e.code is None or e.code is False or e.code == 0):
            finish()
        raise
    finish()
_verify()
`

// Correctness maps a test run to C with the original's table (see the package doc):
// the rules are tried in order on the exit code and the lower-cased output. It is the
// bare table: [Verify] also requires an exit code 0 to come with the completion token
// (else [RuleIncomplete]).
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
