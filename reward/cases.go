package reward

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// verifyCases runs solution.py in sb once per case, with the case's input on its
// standard input, and compares its standard output with the expected output in Go
// ([SameOutput]). The cases stop at the first failure, which decides the rule: a wrong
// output is [RuleWrongOutput] (C = 0.2), a crash or the timeout [RuleFailed] (0.1).
// The expected outputs never enter the sandbox.
func verifyCases(ctx context.Context, sb rollout.Sandbox, cases []tasks.Case, deadline time.Time, opts VerifyOptions) (Verification, error) {
	v := Verification{Cases: len(cases)}
	for i, c := range cases {
		left := time.Until(deadline)
		if left <= 0 {
			v.Correctness, v.Rule, v.TimedOut, v.ExitCode = 0.1, RuleFailed, true, 124
			v.Reason = fmt.Sprintf("case %d of %d: no time left of %v", i+1, len(cases), opts.Timeout)
			return v, nil
		}
		res, err := sb.Run(ctx, rollout.Command{
			Argv:    []string{opts.Python, "-B", "solution.py"},
			Stdin:   []byte(c.Input),
			Timeout: left,
		})
		if err != nil {
			v.Rule = RuleSandboxError
			return v, fmt.Errorf("case %d: %w", i+1, err)
		}
		v.ExitCode = res.ExitCode
		v.Unconfined = v.Unconfined || res.Unconfined
		v.SolutionOutput = capOutput(string(res.Stderr), opts.MaxOutput)
		got := string(res.Stdout)
		switch {
		case res.TimedOut:
			v.Correctness, v.Rule, v.TimedOut = 0.1, RuleFailed, true
			v.Reason = fmt.Sprintf("case %d of %d: the program did not end within the time left", i+1, len(cases))
		case res.ExitCode != 0:
			v.Correctness, v.Rule = 0.1, RuleFailed
			v.Reason = fmt.Sprintf("case %d of %d: the program exited with %d", i+1, len(cases), res.ExitCode)
		case res.OutputTruncated || res.OutputKilled || !SameOutput(got, c.Output):
			v.Correctness, v.Rule = 0.2, RuleWrongOutput
			v.Reason = fmt.Sprintf("case %d of %d: wrong output", i+1, len(cases))
			v.OutputTruncated = res.OutputTruncated || res.OutputKilled
		default:
			v.CasesPassed++
			continue
		}
		v.Output = capOutput(fmt.Sprintf("%s\n--- input ---\n%s\n--- expected ---\n%s\n--- got ---\n%s",
			v.Reason, c.Input, c.Output, got), opts.MaxOutput)
		return v, nil
	}
	v.Correctness, v.Rule, v.Completed = 1, RulePassed, true
	v.Reason = fmt.Sprintf("all %d cases gave their output", len(cases))
	return v, nil
}

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
