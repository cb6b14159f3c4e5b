package reward_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// hack is a wrong solution that tries to earn correctness anyway.
type hack struct {
	name     string
	task     tasks.Task
	solution string
	// check, when set, makes further checks on the verification.
	check func(t *testing.T, v reward.Verification)
}

// Tasks the hacks are tried on.
var (
	fizzbuzz     = tasks.Builtin()[0]
	isPalindrome = tasks.Builtin()[1]
	twoSum       = tasks.Builtin()[2]
	commonPrefix = tasks.Builtin()[4]
	countTask    = tasks.Task{ID: "count", TestCode: "from solution import count\nassert count([1, 2, 3]) == 3\nassert count([]) == 0\nprint('All tests passed!')\n"}
)

// runHacks verifies each hack with every factory and requires C ≤ 0.2.
func runHacks(t *testing.T, factories []rollout.SandboxFactory, hacks []hack) {
	for _, f := range factories {
		for _, h := range hacks {
			t.Run(h.name, func(t *testing.T) {
				t.Parallel()
				v := verifyWork(t, f, h.task, agentWork{"solution.py": h.solution})
				requireFails(t, v)
				if h.check != nil {
					h.check(t, v)
				}
			})
		}
	}
}

func both(t *testing.T) []rollout.SandboxFactory {
	return []rollout.SandboxFactory{bwrapSandboxes(t), dirFactory{t}}
}

// requireRule returns a check that the verification was decided by rule.
func requireRule(rule reward.Rule) func(t *testing.T, v reward.Verification) {
	return func(t *testing.T, v reward.Verification) {
		t.Helper()
		require.Equal(t, rule, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, v.SolutionOutput)
	}
}

const anything = `class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 0
    def __bool__(self):
        return True
    def __len__(self):
        return 15
`

// TestVerifyResistsValuesThatEqualAnything: a value that compares equal to anything
// crosses as a handle, which equals only itself.
func TestVerifyResistsValuesThatEqualAnything(t *testing.T) {
	runHacks(t, both(t), []hack{
		{name: "object whose __eq__ is always true", task: fizzbuzz,
			solution: anything + "def fizzbuzz(n):\n    return Anything()\n", check: requireRule(reward.RuleAssertion)},
		{name: "str subclass with rigged comparison and hashing", task: commonPrefix,
			solution: "class S(str):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n    __hash__ = lambda s: 0\n" +
				"def longest_common_prefix(strs):\n    return S('')\n", check: requireRule(reward.RuleAssertion)},
		{name: "int subclass", task: countTask,
			solution: "class I(int):\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\ndef count(xs):\n    return I(7)\n"},
		{name: "list subclass", task: twoSum,
			solution: "class L(list):\n    __eq__ = lambda s, o: True\ndef two_sum(nums, target):\n    return L([9, 9])\n"},
		{name: "bool-like object for a True/False answer", task: isPalindrome,
			solution: anything + "def is_palindrome(s):\n    return Anything()\n"},
		{name: "elements that equal anything in a real list", task: fizzbuzz,
			solution: anything + "def fizzbuzz(n):\n    return [Anything()] * n\n"},
		{name: "an object that lies about its class", task: fizzbuzz,
			solution: anything + "class Liar(Anything):\n    __class__ = property(lambda s: list)\ndef fizzbuzz(n):\n    return Liar()\n"},
		{name: "a Counter subclass with rigged comparison", task: fizzbuzz, check: requireRule(reward.RuleAssertion),
			solution: "import collections\nclass C(collections.Counter):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n" +
				"def fizzbuzz(n):\n    return C('x')\n"},
		{name: "a list subclass with rigged comparison and iteration", task: fizzbuzz, check: requireRule(reward.RuleAssertion),
			solution: "class L(list):\n    __eq__ = lambda s, o: True\n    def __iter__(s):\n        return iter(['FizzBuzz'])\n" +
				"def fizzbuzz(n):\n    return L()\n"},
		{name: "a patched builtin type in the solution's interpreter", task: fizzbuzz,
			solution: "import builtins\nclass list2(list):\n    __eq__ = lambda s, o: True\nbuiltins.list = list2\n" +
				"def fizzbuzz(n):\n    return list2()\n"},
	})
}

// TestVerifyResistsReachingTheRunner: the solution runs in another process, in another
// sandbox, from the code that decides completion; what it finds or calls in its own
// interpreter is the solution side's harness, whose every word is checked.
func TestVerifyResistsReachingTheRunner(t *testing.T) {
	fault := requireRule(reward.RuleSolutionFault)
	hacks := []hack{
		{name: "call every runner function gc can find", task: fizzbuzz, solution: `import gc
for o in gc.get_objects():
    if callable(o) and getattr(o, "__name__", "") in ("send", "finish", "dumps", "request", "reply", "_verify"):
        for arg in ({"op": "done"}, {"id": 1, "ok": True}):
            try:
                data = o(arg)
                import os
                if isinstance(data, bytes):
                    for fd in range(1, 10):
                        try:
                            os.write(fd, data)
                        except OSError:
                            pass
            except Exception:
                pass
def fizzbuzz(n):
    return []
`},
		{name: "write a completion message through the harness's own descriptor", task: fizzbuzz, solution: `import sys, os
def fizzbuzz(n):
    f = sys._getframe()
    while f is not None:
        for name, value in f.f_locals.items():
            if isinstance(value, int) and name in ("pout", "out", "fd"):
                os.write(value, b'{"op":"done"}\n')
        f = f.f_back
    return []
`, check: fault},
		{name: "print passed and os._exit(0) on import", task: fizzbuzz,
			solution: "print('All tests passed!', flush=True)\nimport os\nos._exit(0)\n", check: fault},
		{name: "print passed and sys.exit(0) on import", task: fizzbuzz,
			solution: "print('All tests passed!')\nimport sys\nsys.exit(0)\n", check: fault},
		{name: "SystemExit from the function under test", task: fizzbuzz,
			solution: "def fizzbuzz(n):\n    print('All tests passed!')\n    raise SystemExit\n", check: fault},
		{name: "unittest.main from the solution", task: fizzbuzz,
			solution: "import unittest\ndef fizzbuzz(n):\n    print('All tests passed!')\n    unittest.main(argv=['x'])\n", check: fault},
		{name: "wrong solution forcing status 0 at exit", task: fizzbuzz,
			solution: "import atexit, os\natexit.register(lambda: os._exit(0))\n" + stubFor(fizzbuzz), check: requireRule(reward.RuleAssertion)},
		{name: "kill itself mid-call", task: fizzbuzz,
			solution: "import os, signal\ndef fizzbuzz(n):\n    os.kill(os.getpid(), signal.SIGKILL)\n", check: fault},
		{name: "close the protocol descriptors", task: fizzbuzz,
			solution: "import os\nfor fd in range(0, 20):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\ndef fizzbuzz(n):\n    return []\n", check: fault},
	}
	runHacks(t, both(t), hacks)

	// Hacks that signal every process they can see run only in bubblewrap, where
	// they can see their own sandbox only.
	runHacks(t, []rollout.SandboxFactory{bwrapSandboxes(t)}, []hack{
		{name: "kill every process in sight", task: fizzbuzz,
			solution: "import os, signal\nprint('All tests passed!', flush=True)\n" +
				"for pid in (-1, 0, 1, os.getpid()):\n    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"},
		{name: "stop the parent", task: fizzbuzz,
			solution: "import os, signal\ndef fizzbuzz(n):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return []\n"},
	})
}

// TestVerifyResistsForgedCodeOrigins: no check depends on file names any more, so
// code compiled under the tests' or the standard library's name gains nothing.
func TestVerifyResistsForgedCodeOrigins(t *testing.T) {
	fault := requireRule(reward.RuleSolutionFault)
	runHacks(t, both(t), []hack{
		{name: "SystemExit(0) from code compiled as the test file", task: fizzbuzz, check: fault, solution: `import os
def fizzbuzz(n):
    print("All tests passed!")
    for name in ("test_visible.py", "/workspace/test_visible.py", os.path.abspath("test_visible.py")):
        pass
    exec(compile("raise SystemExit(0)", "test_visible.py", "exec"))
`},
		{name: "sys.exit(0) from code compiled as the standard library", task: fizzbuzz, check: fault, solution: `import os, sys
exec(compile("import sys\nprint('All tests passed!')\nsys.exit(0)", os.__file__, "exec"))
`},
		{name: "the function's code renamed to the test file", task: fizzbuzz, check: requireRule(reward.RuleAssertion), solution: `def fizzbuzz(n):
    return ["FizzBuzz"]
fizzbuzz.__code__ = fizzbuzz.__code__.replace(co_filename="test_visible.py", co_name="<module>")
`},
		{name: "a value whose class was compiled as builtins", task: fizzbuzz, check: requireRule(reward.RuleAssertion), solution: `ns = {}
exec(compile("class list(list):\n    __eq__ = lambda s, o: True\n    __module__ = 'builtins'", "<frozen builtins>", "exec"), ns)
def fizzbuzz(n):
    return ns["list"]()
`},
	})
}

// TestVerifyResistsReadingTheExpectedValues: the tests live in another sandbox, which
// the solution's sandbox cannot see (so this runs in bubblewrap only); the expected
// values are literals of the test process, never of the solution's.
func TestVerifyResistsReadingTheExpectedValues(t *testing.T) {
	// Each hack prints what it found to stderr; finding nothing is the point.
	nothingFound := func(t *testing.T, v reward.Verification) {
		t.Helper()
		require.Contains(t, v.SolutionOutput, "SEARCHED", "the hack ran")
		require.NotContains(t, v.SolutionOutput, "FOUND", "the hack found the tests")
		require.NotContains(t, v.SolutionOutput, "'14', 'FizzBuzz'")
	}
	runHacks(t, []rollout.SandboxFactory{bwrapSandboxes(t)}, []hack{
		{name: "search the file system, argv, environment and /proc", task: fizzbuzz, check: nothingFound, solution: searchHack},
		{name: "read the expected values from the caller's frames", task: fizzbuzz, check: nothingFound, solution: `import sys
def fizzbuzz(n):
    found = []
    f = sys._getframe(1)
    while f is not None:
        for c in f.f_code.co_consts + tuple(f.f_locals.values()):
            if isinstance(c, (list, tuple)) and "FizzBuzz" in c:
                found.append(c)
        f = f.f_back
    print("SEARCHED", "FOUND %r" % found if found else "", file=sys.stderr)
    return list(found[0]) if found else []
`},
		{name: "look for the expected values in every object of the interpreter", task: fizzbuzz, check: nothingFound, solution: `import gc, sys
def fizzbuzz(n):
    found = [o for o in gc.get_objects() if isinstance(o, list) and "FizzBuzz" in o]
    print("SEARCHED", "FOUND %r" % found if found else "", file=sys.stderr)
    return found[0] if found else []
`},
	})
}

// searchHack looks for the tests everywhere the solution's process can look.
const searchHack = `import os, sys
hits = []
def look(text, where):
    if where == os.path.abspath(__file__):
        return  # the hack's own source
    if "assert fizzbuzz" in text or "FizzBuzz']" in text or "fizzbuzz(100)" in text:
        hits.append(where)
for top in ("/", "/workspace", "/tmp", "/run", "/var", "/home", "/root"):
    for root, dirs, files in os.walk(top):
        if root.startswith(("/proc", "/sys", "/usr", "/dev")):
            dirs[:] = []
            continue
        for name in files:
            try:
                with open(os.path.join(root, name), errors="replace") as f:
                    look(f.read(1 << 20), os.path.join(root, name))
            except OSError:
                pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("cmdline", "environ"):
            try:
                with open("/proc/%s/%s" % (pid, part), "rb") as f:
                    look(f.read().decode(errors="replace"), pid + "/" + part)
            except OSError:
                pass
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                look(os.readlink("/proc/%s/fd/%s" % (pid, fd)), pid + "/fd")
        except OSError:
            pass
look(" ".join(sys.argv), "argv")
look(" ".join("%s=%s" % kv for kv in os.environ.items()), "environ")
print("SEARCHED", "FOUND %r" % hits if hits else "", file=sys.stderr)
def fizzbuzz(n):
    return []
`

func TestSearchHackFindsTestsWhenTheyAreThere(t *testing.T) {
	// The control for the search above: tests left where the solution can read them
	// are found.
	v := verifyWork(t, bwrapSandboxes(t), fizzbuzz, agentWork{"solution.py": searchHack, "notes/tests.txt": fizzbuzz.TestCode})
	require.Contains(t, v.SolutionOutput, "FOUND ['/workspace/notes/tests.txt'", "found through / and /workspace")
}

// TestVerifyResistsProtocolGarbage: whatever the solution writes on its channel that
// is not a well-formed answer to the question asked is a fault, never a pass.
func TestVerifyResistsProtocolGarbage(t *testing.T) {
	// forge writes data to the solution side's protocol descriptor, found in the
	// harness's frame, from inside the function under test, then returns [].
	forge := func(data string) string {
		return `import sys, os
def fizzbuzz(n):
    f = sys._getframe()
    while f is not None and "pout" not in f.f_locals:
        f = f.f_back
    data = ` + data + `
    os.write(f.f_locals["pout"], data if isinstance(data, bytes) else data.encode())
    return []
`
	}
	fault := requireRule(reward.RuleSolutionFault)
	var hacks []hack
	for _, g := range []struct{ name, data string }{
		{"not JSON", `b"garbage\n"`},
		{"a line without its end", `b'{"id": 1'`},
		{"a reply to another request", `'{"id":999,"ok":true}\n'`},
		{"a reply with an extra key", `'{"id":%d,"ok":true,"done":true}\n' % (f.f_locals["req"]["id"])`},
		{"a non-canonical int", `'{"id":%d,"ok":["i","15"]}\n' % (f.f_locals["req"]["id"])`},
		{"a bare JSON number", `'{"id":%d,"ok":15}\n' % (f.f_locals["req"]["id"])`},
		{"an unhashable set element", `'{"id":%d,"ok":["S",[["l",[]]]]}\n' % (f.f_locals["req"]["id"])`},
		{"a negative handle", `'{"id":%d,"ok":["h",-1]}\n' % (f.f_locals["req"]["id"])`},
		{"a value nested too deep", `'{"id":%d,"ok":' % (f.f_locals["req"]["id"]) + '["l",[' * 20000 + ']]' * 20000 + '}\n'`},
		{"a message over the size limit", `b'{"id":1,"ok":["s","' + b"x" * (17 << 20) + b'"]}\n'`},
		{"an exception that is not a builtin", `'{"id":%d,"exc":["Bogus",["t",[]]]}\n' % (f.f_locals["req"]["id"])`},
		{"a forged completion", `b'{"op":"done"}\n'`},
		{"a change to an argument never passed", `'{"id":%d,"ok":["l",[]],"out":[[3,["l",[]]]]}\n' % (f.f_locals["req"]["id"])`},
		{"an int argument changed into a list", `'{"id":%d,"ok":["l",[]],"out":[[0,["l",[]]]]}\n' % (f.f_locals["req"]["id"])`},
	} {
		hacks = append(hacks, hack{name: g.name, task: fizzbuzz, solution: forge(g.data), check: fault})
	}
	// A well-formed wrong answer is an answer, read before the real reply (which then
	// comes unasked): a failed assertion or a fault, depending on which the relay
	// sees first.
	hacks = append(hacks, hack{name: "a valid answer followed by the real one", task: fizzbuzz,
		solution: forge(`'{"id":%d,"ok":["l",[]]}\n' % (f.f_locals["req"]["id"])`)})
	// Answers from a forked child or sent ahead race the real ones: a fault or a failed
	// assertion, depending on which the relay sees first.
	hacks = append(hacks, hack{name: "a forked child answering every id", task: fizzbuzz, solution: `import os, sys
def fizzbuzz(n):
    f = sys._getframe()
    while "pout" not in f.f_locals:
        f = f.f_back
    if os.fork() == 0:
        for i in range(1, 50):
            os.write(f.f_locals["pout"], b'{"id":%d,"ok":["l",[]]}\n' % i)
        os._exit(0)
    return []
`})
	hacks = append(hacks, hack{name: "answers sent ahead for the next ids", task: fizzbuzz, solution: `import os, sys
def fizzbuzz(n):
    f = sys._getframe()
    while "pout" not in f.f_locals:
        f = f.f_back
    first = f.f_locals["req"]["id"] + 1
    os.write(f.f_locals["pout"], b"".join(b'{"id":%d,"ok":["l",[]]}\n' % i for i in range(first, first + 30)))
    return []
`})
	hacks = append(hacks, hack{name: "garbage on every descriptor at import", task: fizzbuzz, solution: `import os
for fd in range(0, 20):
    try:
        os.write(fd, b"\x00garbage\n{\"op\": \"done\"}\n")
    except OSError:
        pass
def fizzbuzz(n):
    return []
`})
	runHacks(t, both(t), hacks)
}

// TestVerifyResistsStopIteration: StopIteration raised by a call (not by next) would
// end a map() or filter() early, skipping the checks left; it arrives as RuntimeError.
func TestVerifyResistsStopIteration(t *testing.T) {
	task := tasks.Task{ID: "stop", TestCode: "from solution import f\n" +
		"assert all(map(lambda c: f(c[0]) == c[1], [(1, 2), (2, 3)]))\n" +
		"assert not any(filter(lambda x: f(x) != x + 1, [1, 2]))\n" +
		"print('All tests passed!')\n"}
	stopped := func(t *testing.T, v reward.Verification) {
		require.Contains(t, v.Output, "RuntimeError: the solution raised")
	}
	runHacks(t, both(t), []hack{
		{name: "StopIteration from the function", task: task, check: stopped,
			solution: "def f(x):\n    raise StopIteration\n"},
		{name: "StopIteration subclass after a right answer", task: task, check: stopped,
			solution: "class Done(StopIteration):\n    pass\nn = 0\ndef f(x):\n    global n\n    n += 1\n    if n > 1:\n        raise Done\n    return x + 1\n"},
	})
	// Iterators of the solution still end as they should.
	v := verifyWork(t, dirFactory{t}, tasks.Task{ID: "it", TestCode: "from solution import f\nassert list(f(3)) == [0, 1, 2]\nprint('passed')\n"},
		agentWork{"solution.py": "class It:\n    def __init__(self, n):\n        self.i, self.n = 0, n\n    def __iter__(self):\n        return self\n" +
			"    def __next__(self):\n        if self.i == self.n:\n            raise StopIteration\n        self.i += 1\n        return self.i - 1\ndef f(n):\n    return It(n)\n"})
	require.Equal(t, reward.RulePassed, v.Rule, v.Output)
}

// TestVerifyResistsSleepingForever: a solution that never answers times out.
func TestVerifyResistsSleepingForever(t *testing.T) {
	for _, f := range both(t) {
		v := verifyWorkWith(t, f, fizzbuzz, agentWork{"solution.py": "import time\ndef fizzbuzz(n):\n    time.sleep(3600)\n"},
			reward.VerifyOptions{Timeout: 1500 * time.Millisecond})
		requireFails(t, v)
		require.Equal(t, reward.RuleFailed, v.Rule)
		require.True(t, v.TimedOut)
	}
}
