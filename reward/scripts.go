package reward

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

var (
	//go:embed harness/codec.py
	codecPy string
	//go:embed harness/tests.py
	testsPy string
	//go:embed harness/solution.py
	solutionPy string
	//go:embed harness/stderr.py
	stderrPy string

	// harnessLimits are the limits both sides of the harness share, stated once, in
	// Go: a message of MaxMessage bytes (its newline not counted) passes on both sides.
	harnessLimits = fmt.Sprintf("MAX_DEPTH = %d\nMAX_LINE = %d\nSTDERR_KEEP = %d\n", MaxDepth, MaxMessage, stderrKeep)

	// testsProgram and solutionProgram are the two sides' programs, run with -c.
	testsProgram    = harnessLimits + codecPy + "\n" + testsPy
	solutionProgram = harnessLimits + codecPy + "\n" + stderrPy + "\n" + solutionPy
)

// stderrKeep is how many bytes of the head and of the tail of the solution's standard
// error its harness keeps (harness/stderr.py); the rest is read and dropped, so that
// no amount of it gets the solution killed for output.
const stderrKeep = 16 << 10

// Script names in the test sandbox's workspace.
const (
	visibleScript = "test_visible.py"
	hiddenScript  = "test_hidden.py"
)

// verifyScripts runs t's test code against the solution in sb, the tests in a fresh
// sandbox from tests, and decides the verdict from the test process's own channel.
func verifyScripts(ctx context.Context, sb rollout.Sandbox, tests rollout.SandboxFactory, t tasks.Task, opts VerifyOptions) (Verification, error) {
	v := Verification{Rule: RuleSandboxError}
	solStarter, ok := sb.(rollout.Starter)
	if !ok {
		return v, fmt.Errorf("solution sandbox %T: %w", sb, ErrNoStarter)
	}
	if tests == nil {
		return v, errors.New("no sandbox factory for the tests: pass the rollout's factory to Verify")
	}
	tsb, err := tests.NewSandbox(ctx)
	if err != nil {
		return v, fmt.Errorf("test sandbox: %w", err)
	}
	defer tsb.Close()
	testStarter, ok := tsb.(rollout.Starter)
	if !ok {
		return v, fmt.Errorf("test sandbox %T: %w", tsb, ErrNoStarter)
	}
	argv := []string{opts.Python, "-I", "-B", "-u", "-c", bootPy, testsProgram}
	for _, s := range []struct{ name, code string }{{visibleScript, t.TestCode}, {hiddenScript, t.HiddenTests}} {
		if s.code == "" {
			continue
		}
		if err := tsb.WriteFile(s.name, []byte(s.code)); err != nil {
			return v, fmt.Errorf("write tests: %w", err)
		}
		argv = append(argv, s.name)
	}

	// Compiled in the test sandbox, before any test, the first time (harnesscode.go).
	code := compiledFor(ctx, unwrapTests(tsb), opts.Python)

	// The solution process may outlive the test process by a little: it is killed as
	// soon as the tests are done, and its timeout only guards a test process that
	// was killed while it waited.
	sol, err := solStarter.Start(ctx, rollout.Command{
		Argv:    []string{opts.Python, "-I", "-B", "-u", "-c", bootPy, solutionProgram},
		Timeout: opts.Timeout + time.Second,
	})
	if err != nil {
		return v, fmt.Errorf("start the solution process: %w", err)
	}
	test, err := testStarter.Start(ctx, rollout.Command{Argv: argv, Timeout: opts.Timeout})
	if err != nil {
		sol.Kill()
		_, _ = sol.Wait()
		return v, fmt.Errorf("start the test process: %w", err)
	}
	// What harness/boot.py reads first, before anything else runs in either process
	// (each fits a pipe's buffer, so neither write waits for its reader). A write's
	// error is a process that already ended, which the conversation finds as it would
	// without the write.
	_, _ = sol.Stdin().Write(harnessHeader(code, solutionCode(code)))
	_, _ = test.Stdin().Write(harnessHeader(code, testsCode(code)))
	c, stop := relay(test, sol)
	solRes, solErr := endSolution(sol)
	testRes, testErr := test.Wait()
	stop()
	if err := errors.Join(testErr, solErr); err != nil {
		return v, err
	}
	if err := harnessFailure(c, testRes, solRes); err != nil {
		return v, err
	}
	return verdict(c, testRes, solRes, opts), nil
}

// solutionGrace is how long the solution process has to end by itself once the tests
// are done and its input is closed (its harness exits at once; what its stderr
// drainer holds is then written out) before it is killed.
const solutionGrace = time.Second

// endSolution ends the solution process once the tests are done: it closes its input,
// on which the harness exits, and kills it if it has not ended within solutionGrace.
func endSolution(sol rollout.Process) (rollout.CommandResult, error) {
	_ = sol.Stdin().Close()
	type result struct {
		res rollout.CommandResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sol.Wait()
		done <- result{res, err}
	}()
	timer := time.NewTimer(solutionGrace)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.res, r.err
	case <-timer.C:
		sol.Kill()
		r := <-done
		return r.res, r.err
	}
}

// harnessFailure reports a side whose harness never started (it did not say hello)
// while that mattered: a broken interpreter or sandbox, never the solution's doing,
// since each harness says hello before any code of the solution or the tests runs.
func harnessFailure(c conversation, testRes, solRes rollout.CommandResult) error {
	switch {
	case testRes.TimedOut:
		return nil
	case !c.testReady:
		return fmt.Errorf("the test harness did not start (exit code %d): %s", testRes.ExitCode, tail(testRes.Stderr))
	case c.fault != "" && !c.solReady && !solRes.TimedOut:
		return fmt.Errorf("the solution harness did not start (exit code %d): %s", solRes.ExitCode, tail(solRes.Stderr))
	}
	return nil
}

// tail is the end of a process's output, for an error message.
func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// verdict applies the correctness table to what the relay saw and what the two
// processes did.
func verdict(c conversation, testRes, solRes rollout.CommandResult, opts VerifyOptions) Verification {
	out := string(testRes.Stderr)
	v := Verification{
		ExitCode:        testRes.ExitCode,
		TimedOut:        testRes.TimedOut,
		Output:          capOutput(out, opts.MaxOutput),
		SolutionOutput:  capOutput(string(solRes.Stderr), opts.MaxOutput),
		OutputTruncated: testRes.OutputTruncated || testRes.OutputKilled,
		Completed:       c.completed,
		Calls:           c.calls,
		Unconfined:      testRes.Unconfined || solRes.Unconfined,
	}
	switch {
	case testRes.TimedOut:
		v.Correctness, v.Rule = 0.1, RuleFailed
		v.Reason = fmt.Sprintf("the tests did not end within %v", opts.Timeout)
	case c.fault != "":
		v.Correctness, v.Rule = 0.1, RuleSolutionFault
		v.Reason = c.fault
		v.TimedOut = solRes.TimedOut
	case testRes.ExitCode == 0 && !c.completed:
		v.Correctness, v.Rule = 0.1, RuleIncomplete
		v.Reason = "the test process exited with 0 before its scripts ran to their end"
	default:
		v.Correctness, v.Rule = Correctness(testRes.ExitCode, out)
		if c.completed {
			v.Reason = fmt.Sprintf("the tests ran to their end and exited with %d", testRes.ExitCode)
		} else {
			v.Reason = fmt.Sprintf("the tests stopped with exit code %d", testRes.ExitCode)
		}
	}
	if c.overLimit > 0 {
		v.Reason += fmt.Sprintf("; a request of the tests (%d bytes) was over the message limit of %d bytes (reward.MaxMessage)",
			c.overLimit, MaxMessage)
	}
	if c.testFault != "" {
		v.Reason += "; " + c.testFault
	}
	if testRes.OutputKilled || solRes.OutputKilled {
		side := "test"
		if !testRes.OutputKilled {
			side = "solution"
		}
		v.Reason += fmt.Sprintf("; the sandbox killed the %s process for output past its hard cap", side)
	}
	return v
}

// conversation is what the relay saw.
type conversation struct {
	// testReady and solReady report that each side's harness said hello: it started.
	testReady, solReady bool
	completed           bool
	calls               int
	// fault says how the solution process broke the conversation ("" if it did not).
	fault string
	// testFault says how the test process broke it ("" if it did not).
	testFault string
	// overLimit is the size of the largest request the test process could not send
	// for being over MaxMessage (0 if none).
	overLimit int64
}

// relay passes the test process's requests to the solution process, one at a time,
// and the checked replies back, until the test process's stdout ends. The verdict's
// facts come only from the test process's channel and from the checks here. The
// returned function stops the relay's readers; call it after both processes' Wait.
func relay(test, sol rollout.Process) (conversation, func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	fromTest, fromSol := make(chan message), make(chan message)
	testReader, solReader := newMsgReader(test.Stdout()), newMsgReader(sol.Stdout())
	wg.Go(func() { readMessages(testReader.request, fromTest, done) })
	wg.Go(func() { readMessages(solutionMessages(solReader), fromSol, done) })
	stop := func() {
		close(done)
		wg.Wait()
		testReader.release()
		solReader.release()
	}

	var c conversation
	var pending *request // sent to the solution, not answered yet
	solEnded := false
	fail := func(why string) {
		if c.fault == "" {
			c.fault = why
		}
		sol.Kill()
	}
	reply := func(chunks [][]byte) bool { return writeChunks(test.Stdin(), chunks) == nil }
	faultReply := func(id int64) [][]byte {
		b, _ := json.Marshal(map[string]any{"id": id, "fault": c.fault})
		return [][]byte{append(b, '\n')}
	}
	for {
		select {
		case m := <-fromTest:
			if m.err != nil {
				if !errors.Is(m.err, io.EOF) {
					// The test process is trusted: a broken message from it ends the
					// run, and its exit decides.
					c.testFault = fmt.Sprintf("the test process sent a broken message: %v", m.err)
					test.Kill()
				}
				return c, stop
			}
			req := m.req
			if pending != nil && req.forSolution() {
				// Trusted, but one request at a time: the harness broke its own rule.
				c.testFault = "the test process sent a request before the last one was answered"
				test.Kill()
				continue
			}
			switch req.op {
			case "hello":
				c.testReady = true
				continue
			case "done":
				c.completed = true
				continue
			case "bad_reply":
				fail("the test process refused a reply: " + req.why)
				continue
			case "over_limit":
				c.overLimit = max(c.overLimit, req.size)
				continue
			}
			if c.fault == "" && solEnded {
				fail("the solution process ended before the tests were done")
			}
			if c.fault == "" {
				c.calls++
				if err := writeChunks(sol.Stdin(), m.chunks); err != nil {
					fail("the solution process is gone (it ended or closed its input)")
				} else {
					pending = &req
					continue
				}
			}
			if !reply(faultReply(req.id)) {
				test.Kill()
			}
		case m := <-fromSol:
			if m.err != nil {
				fromSol, solEnded = nil, true // its reader has stopped
			}
			if m.hello && !c.solReady {
				c.solReady = true
				continue
			}
			var why string
			switch {
			case pending == nil && m.err == nil:
				why = "the solution process sent a message nobody asked for"
			case pending == nil:
				continue // it ended between requests: a fault only if the tests ask again
			case errors.Is(m.err, io.EOF):
				why = "the solution process ended while the tests waited for an answer"
			case errors.Is(m.err, io.ErrUnexpectedEOF), errors.Is(m.err, errTooLong):
				why = fmt.Sprintf("the solution process sent a broken message: %v", m.err)
			case m.err != nil:
				why = fmt.Sprintf("the solution process sent a malformed reply: %v", m.err)
			case m.id != pending.id:
				why = fmt.Sprintf("the solution process sent a malformed reply: id %d, want %d", m.id, pending.id)
			}
			if why != "" {
				fail(why)
			}
			if pending == nil {
				continue
			}
			chunks := m.chunks
			if c.fault != "" {
				chunks = faultReply(pending.id)
			}
			pending = nil
			if !reply(chunks) {
				test.Kill()
			}
		}
	}
}

// solutionMessages reads the solution process's hello, then its replies.
func solutionMessages(r *msgReader) func() message {
	first := true
	return func() message {
		if !first {
			return r.reply()
		}
		first = false
		m := r.request()
		if m.err == nil && m.req.op != "hello" {
			m.err = errors.New("a message before the harness's hello")
		}
		m.hello = m.err == nil
		return m
	}
}

// readMessages sends the messages next reads to out until its stream ends (or a
// message is broken) or done is closed.
func readMessages(next func() message, out chan<- message, done <-chan struct{}) {
	for {
		m := next()
		select {
		case out <- m:
		case <-done:
			return
		}
		if m.err != nil {
			return
		}
	}
}

// writeChunks writes a message kept in chunks.
func writeChunks(w io.Writer, chunks [][]byte) error {
	for _, b := range chunks {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
