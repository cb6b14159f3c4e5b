// Package reward scores a finished rollout.
//
// Scoring has two steps. [Verify] runs the task's canonical tests in the rollout's
// sandbox after the agent has stopped and maps the run to a correctness value with the
// table of the Hermes agentic OPD environment:
//
//	exit code 0 and "passed" in the output            1.0
//	exit code 0                                        0.8
//	"assert" and "error" in the output                 0.2
//	anything else (crash, syntax error, timeout, …)    0.1
//	the sandbox itself failed                          0.0
//
// (the output is matched in lower case). Unlike the original, which ran the
// test_solution.py the agent wrote, the verifier writes the task's own test code to a
// fresh, randomly named file and runs that: what the agent wrote as tests never decides
// the reward. An exit code 0 counts only when the test script ran to its end, which the
// test process proves with a random token it writes last; code the tests imported that
// ends the process early with status 0 (solution.py calling os._exit(0) or sys.exit(0)
// after printing "passed") gets 0.1 ([RuleIncomplete]). See [Verify] for what this does
// and does not stop.
//
// A [Reward] then combines the verification with the trajectory. [Default] is the
// original's 0.7·C + 0.15·E + 0.15·U, clamped to [0, 1], where E ([Efficiency]) rewards
// few turns in bands derived from the turn budget and U ([ToolUsage]) rewards using the
// terminal together with write_file or patch. The [Breakdown] keeps every part for
// metrics.
package reward
