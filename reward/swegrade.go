package reward

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

const (
	// maxLog is the read window: the longest test log that is read and parsed. A
	// longer one is not parsed at all ([RuleLogTooLong]).
	maxLog = 8 << 20
	// logChunk is how much of it one command reads: under the sandbox's default
	// output cap (rollout/bwrap.DefaultOutputLimit).
	logChunk = 48 << 10
)

// RuleLogTooLong: the test log is longer than the 8 MiB grading reads, so it is not
// parsed (C = 0.1). Reading only its end would let a fix's code, which runs inside
// the test process, print padding until the runner's own report falls out of the
// window, then lines of its own.
const RuleLogTooLong Rule = "log_too_long"

// testLog is the test log as grading read it.
type testLog struct {
	// text is the whole log, or, when the log is over the window, its last logChunk
	// bytes (for Verification.Output only).
	text string
	// size is the log's length in bytes.
	size int64
}

// gradeLog grades the test run whose log is l and whose exit status is exitCode:
// a log over the window gets [RuleLogTooLong], any other is parsed with r's parser
// and graded by [GradeRepo]. An unknown parser is an error.
func gradeLog(v *Verification, r *tasks.Repo, l testLog, exitCode int) error {
	if l.size > maxLog {
		if v.Repo == nil {
			v.Repo = &RepoResult{}
		}
		v.Correctness, v.Rule = 0.1, RuleLogTooLong
		v.Reason = fmt.Sprintf("the test log is %d bytes, over the %d bytes grading reads: not parsed (exit status %d)",
			l.size, maxLog, exitCode)
		v.Repo.F2PFailing, v.Repo.P2PFailing = slices.Clone(r.FailToPass), slices.Clone(r.PassToPass)
		v.Repo.F2PRate, v.Repo.P2PRate = rate(len(r.FailToPass), len(r.FailToPass)), rate(len(r.PassToPass), len(r.PassToPass))
		return nil
	}
	statuses, err := ParseTestLog(r.LogParser, l.text)
	if err != nil {
		return err
	}
	GradeRepo(v, r, statuses, exitCode)
	return nil
}

// GradeRepo fills v's correctness, rule, reason and [RepoResult] rates from the parsed
// statuses of a test run that exited with exitCode (the rules of [VerifyRepo]). A
// test of r's lists is looked up by its exact name: [ParseTestLog] names tests as
// the dataset's parser did. v.Repo is allocated when nil.
func GradeRepo(v *Verification, r *tasks.Repo, statuses map[string]TestStatus, exitCode int) {
	if v.Repo == nil {
		v.Repo = &RepoResult{}
	}
	res := v.Repo
	if len(statuses) == 0 {
		v.Correctness, v.Rule = 0.1, RuleTestsNotRun
		v.Reason = fmt.Sprintf("the test log names no test (exit status %d)", exitCode)
		res.F2PFailing, res.P2PFailing = slices.Clone(r.FailToPass), slices.Clone(r.PassToPass)
		res.P2PRate = rate(len(r.PassToPass), len(res.P2PFailing))
		return
	}
	if exitCode != 0 && !slices.ContainsFunc(mapValues(statuses), TestStatus.failed) {
		res.LogVoid = true
		statuses = nil
	}
	pass := func(id string, f2p bool) bool {
		s, ok := statuses[id]
		switch {
		case !ok:
			return false
		case s == StatusPassed || s == StatusXFail:
			return true
		case s == StatusSkipped:
			return !f2p
		}
		return false
	}
	res.F2PFailing, res.P2PFailing = nil, nil
	for _, id := range r.FailToPass {
		if !pass(id, true) {
			res.F2PFailing = append(res.F2PFailing, id)
		}
	}
	for _, id := range r.PassToPass {
		if !pass(id, false) {
			res.P2PFailing = append(res.P2PFailing, id)
		}
	}
	res.F2PRate = rate(len(r.FailToPass), len(res.F2PFailing))
	res.P2PRate = rate(len(r.PassToPass), len(res.P2PFailing))
	res.Resolved = !res.LogVoid && len(res.F2PFailing) == 0 && len(res.P2PFailing) == 0
	switch {
	case res.Resolved:
		v.Correctness, v.Rule, v.Reason = 1.0, RuleResolved, "every FAIL_TO_PASS and PASS_TO_PASS test passed"
	case res.LogVoid:
		v.Correctness, v.Rule = 0.2, RuleUnresolved
		v.Reason = fmt.Sprintf("log void: the test command exited with %d but the log shows no failed test", exitCode)
	default:
		v.Correctness, v.Rule = 0.2, RuleUnresolved
		v.Reason = fmt.Sprintf("%d of %d FAIL_TO_PASS and %d of %d PASS_TO_PASS tests did not pass",
			len(res.F2PFailing), len(r.FailToPass), len(res.P2PFailing), len(r.PassToPass))
	}
}

func mapValues(m map[string]TestStatus) []TestStatus {
	out := make([]TestStatus, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

func rate(total, failing int) float64 {
	if total == 0 {
		return 1
	}
	return float64(total-failing) / float64(total)
}

// readLog reads the test log from gs (none when there is none), in chunks through
// commands in the sandbox: the host never opens a file the tests' code could have
// replaced (by a FIFO, say), and each read has a timeout. A log over the window is
// not read beyond its last logChunk bytes.
func readLog(ctx context.Context, gs rollout.Sandbox, name string) testLog {
	size, err := runOut(ctx, gs, "wc -c <"+name)
	n, perr := strconv.ParseInt(size, 10, 64)
	if err != nil || perr != nil || n <= 0 {
		return testLog{}
	}
	from := int64(0)
	if n > maxLog {
		from = n - logChunk
	}
	var b strings.Builder
	for off := from; off < n; {
		res, err := gs.Run(ctx, rollout.Command{Shell: fmt.Sprintf("tail -c +%d %s | head -c %d", off+1, name, min(logChunk, n-off)), Timeout: gitTimeout})
		if err != nil || res.ExitCode != 0 || len(res.Stdout) == 0 {
			break
		}
		b.Write(res.Stdout)
		off += int64(len(res.Stdout))
	}
	return testLog{text: b.String(), size: n}
}
