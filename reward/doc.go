// Package reward scores a finished rollout.
//
// Scoring has two steps. [Verify] checks the solution the agent left in its sandbox
// against the task's tests, after the agent has stopped, and maps the outcome to a
// correctness value with the table of the Hermes agentic OPD environment:
//
//	the tests ran to their end, exit code 0 and "passed" in their output   1.0
//	the tests ran to their end, exit code 0                                  0.8
//	"assert" and "error" in the output (a failed assertion)                   0.2
//	anything else (crash, syntax error, timeout, …)                           0.1
//	the rollout's sandbox could not run the solution (the agent's doing)      0.1
//	a sandbox itself failed, for no reason an agent can cause (an error)      0.0
//
// (the output is matched in lower case; [Correctness] is the bare table). The
// [Verification] records which row applied ([Rule]) and why ([Verification.Reason]).
// Rows added to the original's table keep its values: [RuleIncomplete] (exit 0 before
// the tests ran to their end) and [RuleSolutionFault] (the solution broke the
// conversation) give 0.1 like any crash, [RuleWrongOutput] (an input/output case
// failed) gives 0.2 like a failed assertion.
//
// # Why the tests and the solution never share a process
//
// The reward is what the student learns from, and a policy under RL pressure finds
// every way to earn it without solving the task. Run in one interpreter, the agent's
// code can return values that compare equal to anything, walk frames or the garbage
// collector to whatever decides completion, forge the file names of code objects,
// and read the expected values from the test file or the caller's constants. Patching
// each trick does not end this; [Verify] removes the shared process instead:
//
//   - The test code (Task.TestCode, then Task.HiddenTests) runs in a fresh sandbox
//     made by the factory passed to Verify, the same one the rollout came from. That
//     sandbox holds only the test scripts; it never holds the agent's files, and the
//     rollout's sandbox never holds the tests: they are not in its workspace, argv or
//     environment, and with the bubblewrap sandbox it cannot see the test process in
//     /proc either (separate pid and mount namespaces; one sandbox per process is
//     needed for that, since the same uid in the same pid namespace could read the
//     other's memory).
//   - In the test process, "import solution" gives a proxy module. Every attribute
//     read, call and operation on it, or on an object it returned, is a request that
//     the verifier relays, one at a time, to a second process started in the
//     rollout's sandbox, which imports solution.py and answers.
//   - Arguments and results cross as plain data only: None, bool, int, float, str,
//     bytes, and tuple, list, dict, set and frozenset of those, nested at most
//     [MaxDepth] (10,000) deep, in both directions (a deeper value the solution returns
//     crosses as a handle at that depth; one the tests pass raises TypeError, naming
//     the limit). The encoder checks exact types (type(x) is int, not
//     isinstance), so a subclass of int, str or list with rigged comparison or hashing
//     is not plain data. The test side decodes strictly (canonical forms only,
//     rebuilding every value from builtin types), so nothing the solution process
//     does to its own interpreter can change a comparison made on the test side.
//   - A call that changes its arguments in place (a list it sorts, a dict or set it
//     fills, as LeetCode's "modify nums in-place" tasks ask) sends them back as they
//     are now, as plain data, and the test side makes its own objects equal to them,
//     keeping their identity and, where the shape did not change, that of the lists,
//     dicts and sets inside them. A change the tests' objects cannot take (another
//     type, an argument never passed) is a fault.
//   - Any other object comes back as an opaque handle. Attribute reads, method calls,
//     and len, bool, str, repr, iter, next, indexing, "in" and isinstance(x, cls) for
//     a class cls of the solution are forwarded; it compares equal only to itself and
//     hashes by identity; arithmetic is not forwarded (TypeError), and other
//     introspection (type, isinstance(handle, list), inspect) sees the proxy.
//     Callables cannot be passed to the solution (a TypeError names what can). This
//     keeps LeetCode-style tests working: Solution().twoSum(…) == [0, 1],
//     s = Stack(); s.push(1); assert s.pop() == 1.
//   - A handle to an object of a subclass of a plain type (collections.Counter,
//     defaultdict, OrderedDict, a namedtuple, an IntEnum member, a user's subclass of
//     list; also a bytearray, compared as bytes, and the keys() and items() of a dict,
//     compared as sets) also has contents: the solution process converts it to that plain type
//     (list(x), int(x), …) when the tests compare it, and the test side compares,
//     orders and hashes those contents with builtin types, as a correct solution
//     returning a Counter expects. What the subclass does to comparison never counts:
//     a rigged __eq__ is not called, and the contents are data like any answer.
//   - Exceptions cross as the nearest builtin exception type and their arguments, and
//     are raised again on the test side as that type, so try/except ValueError works.
//     An exception class the solution defines (class InsufficientFunds(ValueError))
//     reaches the tests, by import or with an exception, as a class of the test
//     side's own, made by the harness with the same name and the same parents (the
//     solution's classes down to the nearest builtin exception) and no code of the
//     solution's, so "except InsufficientFunds" works and catches exactly the
//     solution's exceptions of that class. The attributes the solution set on an
//     exception (self.shortfall = 5), and the values of the properties and slots of
//     its own exception classes, read when the exception is sent, cross with it as
//     plain data or handles and are set on the tests' exception, except names
//     starting with "__" and names its class already has (no method is shadowed). StopIteration ends an
//     iteration only when next() raised it; from any other call it arrives as
//     RuntimeError, so it cannot cut short a map() or filter() the tests iterate over.
//     SystemExit, KeyboardInterrupt and other non-Exception exceptions end the
//     solution process: a fault.
//   - The verdict comes from the test process's own channel: it says "done" when
//     every script ran to its end, on the stdout it had before the tests started
//     (their prints go to stderr), and only its exit code and output are matched
//     against the table. The solution's prints are kept apart
//     ([Verification.SolutionOutput]) and never count.
//   - The relay in Go checks every reply of the solution process before passing it on:
//     one JSON line of at most [MaxMessage] bytes (its newline not counted), exactly
//     the keys "id" (the request's) and "ok" (a value) or "exc" (an exception), each
//     once, ASCII only, values in canonical form. A message that fails a check, one
//     nobody asked for, or the end of the solution process while the tests wait for
//     it is a fault ([RuleSolutionFault], 0.1, whatever the tests print): the test
//     process is told and stops at once. A solution that never answers runs into the
//     timeout (0.1). The relay checks the grammar byte by byte as it reads, never
//     decoding a value into Go values, and keeps a message in chunks (the first of
//     512 bytes, each next one twice the last, up to 64 KiB), so a message costs the
//     host about its own size, whatever it holds.
//     BenchmarkRelayMemory sends the worst reply, MaxMessage bytes of Nones (about
//     3.4 million values): the highest heap was 16.5 MB, 1.03 times the message, for
//     one verification and 66 MB for four at once (before, decoding the reply into
//     map[string]any first: 204 MB, 12.8 times, and 778 MB). BenchmarkCheckReply
//     checks that reply at about 32 MB/s with 17 MB allocated, where the decoding
//     before it ran at 29 MB/s with 337 MB allocated.
//   - Both sides take MaxMessage and MaxDepth from Go (the harness's program starts
//     with them), so a message of exactly MaxMessage bytes passes on both. A request
//     of the tests over MaxMessage is not sent: the test harness raises OverflowError
//     in the tests, which may handle it, and the Verification's Reason names the limit.
//
// The cost is a second sandbox and a second interpreter per verification, started in
// parallel, and one round trip per call. BenchmarkVerify (unconfined test sandbox) and
// BenchmarkVerifyBubblewrap measure a built-in task, visible and hidden tests. On 2
// shared cores under load (load average about 4), run alternately with the code that
// ran the tests inside the solution's process, the medians of five runs of 40
// verifications were 44 ms against 42 ms (unconfined) and 49 ms against 53 ms
// (bubblewrap) of wall time, and 45 ms against 35 ms of child CPU time (unconfined;
// the CPU time of sandboxed processes is not visible to the benchmark); at load
// average 11, 72 ms against 55 ms, 125 ms against 104 ms, and 40 ms against 33 ms. A call from
// the tests to the solution is a round trip through four pipes: BenchmarkVerifyCalls
// measured about 0.44 ms per call in bubblewrap at load average 11 (0.17 ms
// unconfined at load average 8), so tests that make tens of thousands of calls
// need seconds for them, within the default timeout of 30 s. The harness
// uses the json module's C scanner directly, since importing the json package costs
// about 10 ms of start-up per interpreter. Neither side compiles its harness at each
// verification (about 5 ms of CPU for the two, a tenth of a verification): the first
// verification for an interpreter name (VerifyOptions.Python) compiles both in its
// fresh test sandbox, before the test process starts, and the verifier keeps them for
// the life of the process and writes each side its own on its standard input, before
// the protocol; a side whose interpreter has another bytecode magic number compiles
// its source, as does every side while no compilation succeeded (one is tried again a
// minute after a failure). What is kept comes only from the verifier's own sources
// and a sandbox of the tests: the rollout's sandbox only ever receives a copy.
//
// # Sandboxes
//
// Both sandboxes must implement [rollout.Starter], which the bubblewrap and the
// unconfined sandbox of package rollout/sandbox/bwrap do. [Verify] never falls back to
// running the tests in the solution's process: a sandbox without Start gives an error
// wrapping [ErrNoStarter] and correctness 0 ([RuleSandboxError]), and the Env counts
// the rollout as failed instead of training on it. A wrapper around a sandbox must
// forward Start. Each side's harness says hello on its channel before any code of the
// tests or the solution runs; a side that never did (a missing or broken interpreter)
// is an error too, never a score, unless the side that failed is the rollout's and a
// control run shows the interpreter working (see the next section). With an unconfined sandbox the two processes are separate but not
// isolated from each other (same host, same uid); [Verification.Unconfined] says so.
//
// # A rollout never vetoes its group
//
// A failure of verification that the agent's own actions can cause is scored, never
// an error: an error fails the rollout's whole group (the Env's ErrRolloutFailed),
// and a policy under RL pressure would learn to erase the groups it would lose. The
// agent acts in its own sandbox only, so the split is by sandbox. Before anything
// runs there, [Verify] restores its workspace ([rollout.Restorer]: chmod -R u+rwX of
// what the agent locked, in work linear in the tree's size; /tmp, /dev/shm and the
// agent's processes end with each command already); a tree the restore cannot walk
// within its budget ([rollout.ErrRestoreBudget]) is the solution's fault. Then a failure of the rollout's sandbox (the OOM killer taking
// bubblewrap or the interpreter because a tmpfs workspace filled the sandbox's
// memory, the storage quota killing the solution before its first message, a
// workspace it cannot enter) is [RuleSolutionFault], C = 0.1, with
// [Verification.SandboxFault] set, once a control run (the interpreter in a fresh
// sandbox of the same factory) shows the infrastructure working. What no agent
// action can cause stays an error with [RuleSandboxError]: the tests' own fresh
// sandbox or the factory failing (bubblewrap missing, the host's disk), a control
// run that fails, a sandbox without Start, a context that ended. A correct solution
// whose agent then filled its workspace scores 0.1: the workspace is the agent's to
// keep usable, and its files are not removed to make room.
//
// # Hidden tests and input/output cases
//
// Task.HiddenTests runs after Task.TestCode in the same test process; correctness is
// computed over both, so a solution that hard-codes the answers shown in the prompt
// fails. Task.Cases are input/output cases: solution.py is run as a program in the
// rollout's sandbox once per case with the input on its stdin, and all of its stdout
// is compared in Go, as it comes, with the expected output ([SameOutput]: white space
// at line ends, "\r" and trailing empty lines ignored), up to [MaxCaseOutput] bytes;
// the expected outputs never enter a sandbox. A program whose output already differs
// or passes MaxCaseOutput is stopped at once. The cases stop at the first failure.
// Each case has VerifyOptions.CaseTimeout ([DefaultCaseTimeout], 10 s), and all the
// cases together Timeout + len(Cases)×CaseBudget ([DefaultCaseBudget], 1 s): 500
// cases get 530 s by default, where one budget of 30 s would fail a correct program
// for the number of its cases (BenchmarkVerifyCases: a case of a trivial program
// costs 0.08 to 0.1 s in bubblewrap on 2 cores at load average 8 to 11, Python's
// start included, and 0.17 s when other tests run beside it; the budget leaves room
// for a busier machine, and a failing case still ends the cases at once).
//
// Standard error never decides a case or a call: the solution's harness, and the
// few lines that run each case's program (as `python3 -B solution.py` would, in the
// same interpreter), make the solution's stderr a pipe that a forked child drains, passing on its first 16 KiB and keeping its last 16 KiB, so
// that no amount of debugging output gets the solution killed by the sandbox's
// output cap. Once the tests are done, the solution process's input is closed and it
// has a second to end by itself, its drainer writing out what it holds (at most half
// a second of that is spent waiting for children the solution left holding stderr),
// before it is killed. A task with both test code and cases runs both (the tests first) and
// the lower correctness decides: a program that passes tests ending at the 0.8 row
// and prints wrong answers gets 0.2. Reason then gives both parts' reasons.
//
// # What this does not stop
//
// A solution that really computes the answers for the inputs the tests use passes,
// whether or not it solves the task in general; hidden tests with other inputs are
// the defence, and only as good as their coverage. A solution may answer from a
// table indexed by the order of calls (or of the requests on a handle: bool, len,
// contents). Test code is trusted: what it asserts is what is checked, and a test
// that prints "passed" without asserting passes anything. Since arguments changed in
// place come back as in one process, a test that computes its expected value from an
// argument after the call (f(xs) == sorted(xs)) can be met by a solution that changes
// the argument; a test that fixes the expected value first (want = sorted(xs)) cannot.
// The conversation itself is not output: the sandbox of package rollout/sandbox/bwrap
// caps what a process writes to standard error, not what the relay reads from its
// pipe, so tests may make any number of calls; each message is bounded by
// [MaxMessage]. An argument the tests pass is a copy in the solution process: a test that checks
// identity (f(xs) is xs) fails, and objects of the tests' own classes cannot be
// passed at all.
//
// # Repository tasks
//
// A repository task ([tasks.Task.Repo]) is graded by [VerifyRepo] instead, by its
// hidden tests as SWE-bench grades (its v5 rules, which are stricter than v4.1's):
//
//	every FAIL_TO_PASS and PASS_TO_PASS test passed ([RuleResolved])           1.0
//	the tests ran, the task is not resolved ([RuleUnresolved])                0.2
//	the diff cannot be taken or applied ([RulePatchFailed]), the tests
//	  timed out or their log names no test ([RuleTestsNotRun])                0.1
//	the test log is longer than the 8 MiB grading reads ([RuleLogTooLong])    0.1
//	the image, the grading sandbox or the task's test patch failed (an error) 0.0
//
// Nothing the agent leaves behind takes part in its own grading: its only input is
// its diff, and the diff is taken by the library's own git. When the agent has
// stopped (every process it started ended with its command), a script in its sandbox
// runs git with a GIT_DIR, index, HOME and configuration of the library's own in a
// fresh directory, no system or global configuration, and an info/attributes that
// leaves every attribute unspecified (no filter, end-of-line or encoding conversion,
// keyword expansion, diff or merge driver): the repository's .git/config, hooks,
// index (a leftover index.lock too), HEAD, refs, .gitattributes and .gitignore are
// never read; its object store serves as an alternate for the start commit only
// (one the agent tampered with yields a diff git apply refuses: 0.1). Every file of
// the work tree is taken, ignored ones included, except what the image's work tree
// held untracked at the start (its build output); a nested repository is not taken.
// The diff is read from that command's own standard output, at most
// [RepoOptions.MaxDiff] bytes ([rollout.Starter] streams it; a larger diff is the
// agent's fault, 0.1).
//
// The diff loses every file the grading owns or no fix needs, by the path git itself
// would write (C-quoted names decoded, escapes and all; every name of a section's
// header lines, renames and copies included; a name that cannot be placed for
// certain drops its section): the files the test patch touches and the task's hidden
// files, any file a test runner would load as a test (conftest.py anywhere, files in
// or named tests, test or testing, test_*.py, *_test.py) whether added or edited, the
// test runner's configuration (pytest.ini, .pytest.ini, pytest.toml, .pytest.toml,
// tox.ini: addopts = -p plugin), .gitattributes, Python's start-up modules
// (sitecustomize, usercustomize in any importable form), paths in .git or outside the
// tree, build output and packaging metadata (__pycache__, *.pyc, *.egg-info,
// *.dist-info, *.egg: a distribution's entry points load pytest plugins)
// ([RepoResult.Discarded]; test files counted in [RepoResult.TestFileEdits]). The
// rest goes into a fresh sandbox of the image with git apply alone. Then a guard
// there lists, with git, every path that now differs from the start, no ignore rule
// applied, and puts back as it was: whatever the rules above discard (a second
// reading, by git itself), any module the agent added in place of one the image's
// Python provides outside the repository (pytest.py, pytest/, _pytest/, pluggy.py,
// argparse.py...: a module file, or a package the agent made, named as a top-level
// module of the image, in a directory that is no package, since python -m pytest puts
// the working directory first on sys.path and pytest inserts test directories: this
// holds on every Python from 3.4, where PYTHONSAFEPATH needs 3.11), and pytest's
// sections of setup.cfg ([tool:pytest], [pytest]) and pyproject.toml (tool.pytest),
// anywhere in the tree, keeping the rest of each file (or the whole file, when the
// two cannot be separated for certain). The test files are then restored from the
// image's commit (those it does not hold are removed) and the test patch applied, with
// attributes ignored, so an agent that writes the hidden test file itself gains
// nothing even if the filter missed it.
// The test command's output goes to a log in the grading sandbox; its exit status comes from
// the sandbox, not from the log. A log longer than 8 MiB is not parsed at all: read
// from its end, it would let the fix's code print padding until the runner's report
// fell out of what is read, then lines of its own. The log is parsed with the task's
// parser, which names each test as the SWE-bench harness's parser of that name does
// ([ParseTestLog]), since the datasets' FAIL_TO_PASS and PASS_TO_PASS lists hold the
// names that parser produced: parse_log_pytest cuts an id at its first white space,
// so "test_f[NOT x]" is stored as "test_f[NOT". Names are compared exactly: a name
// stands for exactly the tests SWE-bench's parser gives that name, never for a test
// it is a prefix of. A test the log names twice keeps its worst status, so a planted
// "PASSED id" line does not cover pytest's own "FAILED id", and tests cut to one
// name share their worst status (SWE-bench keeps the last line's status: stricter
// here); a failed test command whose log shows no failure is void (nothing passed);
// a FAIL_TO_PASS test that is skipped or missing has not passed (a skipped
// PASS_TO_PASS test is no regression).
// The task's base commit must be the image's checked-out commit ([PrepareRepo]
// refuses any other, naming both).
// The host's work on the diff is linear in its size and stops with ctx.
//
// What grading cannot exclude: the fix's code runs inside the test process (it is
// the code under test), so a fix written to fool the runner from there (patching
// pytest's reports on import, or printing pytest's lines and ending the process with
// status 0 before pytest reports) is not caught by any log-based grader. The rules
// above close the cheap forms. SWE-smith tasks hide their failing tests by deleting
// them in a commit before the agent starts; the image's history still holds them
// (git show HEAD~1:…), as in SWE-smith itself.
//
// [VerifyPatch] grades a given patch (the gold patch, the empty one) the same way;
// examples/validate-tasks uses it to check datasets.
//
// # The reward
//
// A [Reward] then combines the verification with the trajectory. [Default] is the
// original's 0.7·C + 0.15·E + 0.15·U, clamped to [0, 1], where E ([Efficiency]) rewards
// few turns in bands derived from the turn budget and U ([ToolUsage]) rewards using the
// terminal together with write_file or patch. The [Breakdown] keeps every part for
// metrics.
package reward
