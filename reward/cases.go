package reward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Input/output case limits.
const (
	// DefaultCaseTimeout bounds one input/output case (VerifyOptions.CaseTimeout).
	DefaultCaseTimeout = 10 * time.Second
	// DefaultCaseBudget is what each case adds to the time the cases of a task have
	// together (VerifyOptions.CaseBudget): Timeout + len(Cases)×CaseBudget, so that
	// 500 cases of 0.2 s each fit (with room for a loaded machine), where one budget
	// of 30 s would not.
	DefaultCaseBudget = time.Second
	// MaxCaseOutput bounds the standard output of one case: it is read as it comes
	// and compared with the expected output up to this many bytes; a program that
	// writes more is stopped and its output is wrong. A task whose expected output is
	// longer cannot be verified ([Verify] returns an error).
	MaxCaseOutput = 32 << 20
)

// caseRunner is the program a case runs, `python3 -B -c caseRunner`: it bounds the
// solution's standard error (harness/stderr.py), then runs solution.py as
// `python3 -B solution.py` would (as __main__, with its argv and its directory first
// on sys.path), in the same interpreter, so that a case costs one Python start-up.
var caseRunner = fmt.Sprintf("STDERR_KEEP = %d\n", stderrKeep) + stderrPy + `
import atexit as _atexit, os as _os, runpy as _runpy, sys as _sys
_atexit.register(_end_stderr, _bound_stderr(STDERR_KEEP), (2,))
del _bound_stderr, _end_stderr, STDERR_KEEP
try:
    open("solution.py", "rb").close()
except OSError as e:  # as the interpreter says it, with its exit code
    _sys.stderr.write("python3: can't open file %r: [Errno %d] %s\n" % (_os.path.abspath("solution.py"), e.errno, e.strerror))
    _sys.exit(2)
_sys.argv = ["solution.py"]
_sys.path[0] = _os.getcwd()
_runpy.run_path("solution.py", run_name="__main__")
`

// verifyCases runs solution.py in sb once per case, with the case's input on its
// standard input, and compares its standard output, as it comes, with the expected
// output in Go ([SameOutput]). The cases stop at the first failure, which decides the
// rule: a wrong output is [RuleWrongOutput] (C = 0.2), a crash or a timeout
// [RuleFailed] (0.1). The expected outputs never enter the sandbox. Each case has
// opts.CaseTimeout, and all of them together opts.Timeout + len(cases)×opts.CaseBudget.
func verifyCases(ctx context.Context, sb rollout.Sandbox, cases []tasks.Case, opts VerifyOptions) (Verification, error) {
	v := Verification{Cases: len(cases), Rule: RuleSandboxError}
	st, ok := sb.(rollout.Starter)
	if !ok {
		return v, fmt.Errorf("solution sandbox %T: %w", sb, ErrNoStarter)
	}
	for i, c := range cases {
		if len(c.Output) > MaxCaseOutput {
			return v, fmt.Errorf("case %d expects %d bytes of output, more than reward.MaxCaseOutput (%d)", i+1, len(c.Output), MaxCaseOutput)
		}
	}
	budget := casesBudget(len(cases), opts)
	deadline := time.Now().Add(budget)
	for i, c := range cases {
		left := time.Until(deadline)
		if left <= 0 {
			v.Correctness, v.Rule, v.TimedOut, v.ExitCode = 0.1, RuleFailed, true, 124
			v.Reason = fmt.Sprintf("case %d of %d: no time left of the cases' %v", i+1, len(cases), budget)
			return v, nil
		}
		run, err := runCase(ctx, st, c, min(opts.CaseTimeout, left), opts)
		if err != nil {
			v.Rule = RuleSandboxError
			return v, fmt.Errorf("case %d: %w", i+1, err)
		}
		res := run.res
		v.ExitCode = res.ExitCode
		v.Unconfined = v.Unconfined || res.Unconfined
		v.SolutionOutput = capOutput(string(res.Stderr), opts.MaxOutput)
		switch {
		case run.over:
			v.Correctness, v.Rule, v.OutputTruncated = 0.2, RuleWrongOutput, true
			v.Reason = fmt.Sprintf("case %d of %d: more than %d bytes of output (reward.MaxCaseOutput)", i+1, len(cases), MaxCaseOutput)
		case run.wrong:
			v.Correctness, v.Rule = 0.2, RuleWrongOutput
			v.Reason = fmt.Sprintf("case %d of %d: wrong output", i+1, len(cases))
		case res.TimedOut:
			v.Correctness, v.Rule, v.TimedOut = 0.1, RuleFailed, true
			v.Reason = fmt.Sprintf("case %d of %d: the program did not end within %v", i+1, len(cases), min(opts.CaseTimeout, left).Round(time.Millisecond))
		case res.ExitCode != 0:
			v.Correctness, v.Rule = 0.1, RuleFailed
			v.Reason = fmt.Sprintf("case %d of %d: the program exited with %d", i+1, len(cases), res.ExitCode)
		case res.OutputKilled:
			v.Correctness, v.Rule, v.OutputTruncated = 0.1, RuleFailed, true
			v.Reason = fmt.Sprintf("case %d of %d: the sandbox killed the program for its output", i+1, len(cases))
		case !run.same:
			v.Correctness, v.Rule = 0.2, RuleWrongOutput
			v.Reason = fmt.Sprintf("case %d of %d: wrong output", i+1, len(cases))
		default:
			v.CasesPassed++
			continue
		}
		got := string(run.head)
		if run.n > int64(len(run.head)) {
			got += fmt.Sprintf("\n…[%d more bytes]…", run.n-int64(len(run.head)))
		}
		v.Output = capOutput(fmt.Sprintf("%s\n--- input ---\n%s\n--- expected ---\n%s\n--- got ---\n%s",
			v.Reason, c.Input, c.Output, got), opts.MaxOutput)
		return v, nil
	}
	v.Correctness, v.Rule, v.Completed = 1, RulePassed, true
	v.Reason = fmt.Sprintf("all %d cases gave their output", len(cases))
	return v, nil
}

// casesBudget is the time n cases have together.
func casesBudget(n int, opts VerifyOptions) time.Duration {
	return opts.Timeout + time.Duration(n)*opts.CaseBudget
}

// caseRun is what one case did.
type caseRun struct {
	res rollout.CommandResult
	// same reports that the whole output matched; wrong, that it already differed
	// when the program was stopped; over, that it passed MaxCaseOutput.
	same, wrong, over bool
	head              []byte // the first bytes of the output, for the report
	n                 int64  // bytes of output read
}

// runCase runs solution.py with c's input and compares its output as it comes. A
// program whose output already differs, or is too long, is stopped at once.
func runCase(ctx context.Context, st rollout.Starter, c tasks.Case, timeout time.Duration, opts VerifyOptions) (caseRun, error) {
	p, err := st.Start(ctx, rollout.Command{
		Argv:    []string{opts.Python, "-B", "-c", caseRunner},
		Timeout: timeout,
	})
	if err != nil {
		return caseRun{}, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// A program that does not read its input ends the write (EPIPE, or the pipe
		// closed by Wait).
		_, _ = io.WriteString(p.Stdin(), c.Input)
		_ = p.Stdin().Close()
	})
	var run caseRun
	m := outputMatcher{want: normalize(c.Output)}
	buf := make([]byte, 64<<10)
	for {
		n, err := p.Stdout().Read(buf)
		if n > 0 {
			run.n += int64(n)
			if room := opts.MaxOutput - len(run.head); room > 0 {
				run.head = append(run.head, buf[:min(n, room)]...)
			}
			m.write(buf[:n])
			run.wrong, run.over = m.bad, run.n > MaxCaseOutput
			if run.wrong || run.over {
				p.Kill()
				break
			}
		}
		if err != nil {
			break
		}
	}
	res, err := p.Wait()
	wg.Wait()
	if err != nil && !errors.Is(err, io.EOF) {
		return run, err
	}
	run.res = res
	run.same = !run.wrong && !run.over && m.same()
	return run, nil
}

// outputMatcher compares a stream with a normalized expected output as [SameOutput]
// does, without keeping the stream: white space at the end of a line and newlines are
// held back until something follows that makes them count.
type outputMatcher struct {
	want   string
	pos    int    // bytes of want matched
	nl     int    // newlines held back
	ws     []byte // white space held back, at most what is left of want
	wsOver bool   // more white space held back than want has left
	bad    bool   // the output already differs
}

func (m *outputMatcher) write(b []byte) {
	for len(b) > 0 && !m.bad {
		if m.clean() {
			// Nothing held back: bytes that are exactly what want has next are taken
			// a block at a time (want has no white space at a line end and no
			// newline at its end, so such bytes count whatever follows them).
			n := min(len(b), matchBlock, len(m.want)-m.pos)
			if n > 0 && string(b[:n]) == m.want[m.pos:m.pos+n] {
				m.pos += n
				b = b[n:]
				continue
			}
		}
		// Byte by byte until nothing is held back again.
		i := 0
		for i < len(b) {
			m.byte(b[i])
			i++
			if m.bad || m.clean() {
				break
			}
		}
		b = b[i:]
	}
}

// matchBlock is how many bytes outputMatcher compares at once.
const matchBlock = 4 << 10

// clean reports that nothing is held back.
func (m *outputMatcher) clean() bool { return m.nl == 0 && len(m.ws) == 0 && !m.wsOver }

// byte takes one byte of the output.
func (m *outputMatcher) byte(c byte) {
	switch c {
	case '\n':
		m.nl++
		m.ws, m.wsOver = m.ws[:0], false
	case ' ', '\t', '\r', '\v', '\f':
		if len(m.ws) < len(m.want)-m.pos {
			m.ws = append(m.ws, c)
		} else {
			m.wsOver = true
		}
	default:
		m.flush()
		if m.bad || m.pos >= len(m.want) || m.want[m.pos] != c {
			m.bad = true
			return
		}
		m.pos++
	}
}

// flush counts what was held back: something other than a line end follows it.
func (m *outputMatcher) flush() {
	if m.nl == 0 && len(m.ws) == 0 && !m.wsOver {
		return
	}
	for ; m.nl > 0; m.nl-- {
		if m.pos >= len(m.want) || m.want[m.pos] != '\n' {
			m.bad = true
			return
		}
		m.pos++
	}
	if m.wsOver || !strings.HasPrefix(m.want[m.pos:], string(m.ws)) {
		m.bad = true
		return
	}
	m.pos += len(m.ws)
	m.ws = m.ws[:0]
}

// same reports whether the output so far, its held-back end ignored, is the
// expected output.
func (m *outputMatcher) same() bool { return !m.bad && m.pos == len(m.want) }

// SameOutput reports whether a program's output matches the expected output, with
// white space at the ends of lines, "\r" line ends and empty lines at the end ignored.
func SameOutput(got, want string) bool { return normalize(got) == normalize(want) }

func normalize(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r\v\f")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
