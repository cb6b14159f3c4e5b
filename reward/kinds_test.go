package reward_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// kindCase is a solution for a task of some kind and the rule it must get.
type kindCase struct {
	name     string
	solution string
	rule     reward.Rule
	timeout  time.Duration // 0 means the default
}

func runKind(t *testing.T, task tasks.Task, cases []kindCase) {
	forEachFactory(t, func(t *testing.T, f rollout.SandboxFactory) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				v := verifyWorkWith(t, f, task, agentWork{"solution.py": c.solution}, reward.VerifyOptions{Timeout: c.timeout})
				require.Equal(t, c.rule, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, v.SolutionOutput)
				if c.rule == reward.RulePassed {
					require.Equal(t, 1.0, v.Correctness)
				} else {
					requireFails(t, v)
				}
			})
		}
	})
}

// stackTask tests LeetCode-style classes: objects made by the tests, methods called on
// them, state kept between calls.
var stackTask = tasks.Task{ID: "stack", TestCode: `from solution import Stack, Solution

s = Stack()
assert s.is_empty() == True
s.push(1)
s.push(2)
assert len(s) == 2
assert s.peek() == 2
assert s.pop() == 2
assert s.pop() == 1
assert s.is_empty()
assert not s
t = Stack()
assert s == s and s != t and t is not s
assert isinstance(s, Stack) and not isinstance(3, Stack) and not isinstance(object(), Stack)
assert isinstance(s, (int, Stack)) and not isinstance(Solution(), Stack)
assert s.push(3) is s, "push returns the stack"
s.size = 10
assert s.size == 10
assert Solution().twoSum([2, 7, 11, 15], 9) == [0, 1]
print("All tests passed!")
`, HiddenTests: `from solution import Stack
s = Stack()
for i in range(100):
    s.push(i)
assert [s.pop() for _ in range(100)] == list(range(99, -1, -1))
`}

const goodStack = `class Stack:
    def __init__(self):
        self.items = []
    def push(self, x):
        self.items.append(x)
        return self
    def pop(self):
        return self.items.pop()
    def peek(self):
        return self.items[-1]
    def is_empty(self):
        return not self.items
    def __len__(self):
        return len(self.items)

class Solution:
    def twoSum(self, nums, target):
        seen = {}
        for j, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], j]
            seen[x] = j
`

func TestVerifyStatefulClasses(t *testing.T) {
	runKind(t, stackTask, []kindCase{
		{name: "correct", solution: goodStack, rule: reward.RulePassed},
		{name: "a queue instead of a stack", rule: reward.RuleAssertion,
			solution: goodStack + "Stack.pop = lambda self: self.items.pop(0)\n"},
		{name: "pop returns a value equal to anything", rule: reward.RuleAssertion,
			solution: anything + goodStack + "Stack.pop = lambda self: Anything()\n"},
		{name: "push does not return the stack", rule: reward.RuleAssertion,
			solution: goodStack + "Stack.push = lambda self, x: self.items.append(x)\n"},
	})
}

// exceptionTask expects builtin exceptions, with messages.
var exceptionTask = tasks.Task{ID: "age", TestCode: `from solution import parse_age

assert parse_age("42") == 42
for bad in ["", "-1", "abc", "200"]:
    try:
        parse_age(bad)
    except ValueError as e:
        assert "age" in str(e), str(e)
    else:
        raise AssertionError("no ValueError for %r" % bad)
try:
    parse_age(None)
except TypeError:
    pass
else:
    raise AssertionError("no TypeError for None")
try:
    parse_age({})
except (TypeError, KeyError) as e:
    assert type(e) is KeyError and e.args == ("key", 1)
print("All tests passed!")
`}

const goodAge = `class AgeError(ValueError):
    pass

def parse_age(s):
    if s is None:
        raise TypeError("want a string")
    if s == {}:
        raise KeyError("key", 1)
    if not s.isdigit():
        raise AgeError("bad age %r" % s)
    n = int(s)
    if n > 150:
        raise ValueError("age %d is too high" % n)
    return n
`

func TestVerifyExceptionTasks(t *testing.T) {
	runKind(t, exceptionTask, []kindCase{
		{name: "correct, with a subclass of ValueError", solution: goodAge, rule: reward.RulePassed},
		{name: "returns -1 instead of raising", rule: reward.RuleAssertion,
			solution: "def parse_age(s):\n    return int(s) if s and s.isdigit() and int(s) <= 150 else -1\n"},
		{name: "raises the wrong type", rule: reward.RuleFailed,
			solution: "def parse_age(s):\n    if s == '42':\n        return 42\n    raise RuntimeError('age')\n"},
		{name: "raises an exception that claims to be anything", rule: reward.RuleFailed,
			solution: "class E(Exception):\n    __class__ = ValueError\n" +
				"def parse_age(s):\n    if s == '42':\n        return 42\n    raise E('age')\n"},
		{name: "raises SystemExit", rule: reward.RuleSolutionFault,
			solution: "def parse_age(s):\n    if s == '42':\n        return 42\n    raise SystemExit(0)\n"},
	})
}

// valuesTask checks that plain values cross exactly, and other values as handles.
var valuesTask = tasks.Task{ID: "values", TestCode: `from solution import values, echo, gen, deep, loud, big, same

v = values()
assert type(v) is dict
assert v["int"] == 2 ** 200 and type(v["int"]) is int
assert v["neg"] == -7
assert v["bool"] is True and v["zero"] is False and v["none"] is None
assert v["float"] == 0.1 and type(v["float"]) is float
assert v["nan"] != v["nan"]
assert v["inf"] == float("inf") and v["minf"] == float("-inf")
assert str(v["negzero"]) == "-0.0"
assert v["bytes"] == b"\x00\xffab" and type(v["bytes"]) is bytes
assert v["set"] == {(1, 2), (3, 4)} and type(v["set"]) is set
assert v["frozen"] == frozenset({"a"}) and type(v["frozen"]) is frozenset
assert v[(1, "k")] == "tuple key"
assert v[frozenset({1})] == "frozenset key"
assert v["text"] == "é\n\u2028\"'\\ \x00"
assert v["tuple"] == (1, (2, [3])) and type(v["tuple"][1]) is tuple
for x in [0, -1, 2 ** 70, -(2 ** 4000), 1.5, "s", b"b", (1, [2, {3: 4}]), {1, 2}, frozenset(), None, True, {"a": [1]}, [], {}]:
    y = echo(x)
    assert y == x and type(y) is type(x), (x, y)
assert echo(True) is True and type(echo(1)) is int and echo(1) is not True
assert echo(a=1, b=[2]) == {"a": 1, "b": [2]}
assert list(gen(3)) == [0, 1, 2]
g = gen(2)
assert next(g) == 0 and next(g) == 1
assert loud(5) == 5
assert isinstance(deep(50), list)
d, n = deep(10050), 0
while isinstance(d, list):
    d, n = d[0], n + 1
assert n < 10050, "nested too deep to cross: a handle"
assert len(d) == 1 and isinstance(d[0], list), "the handle forwards len and indexing"
assert len(big()) == 50000
h = same()
assert h is same() and h == same() and h != gen(1)
assert {h: 1}[same()] == 1
print("All tests passed!")
`}

const goodValues = `import sys

def values():
    return {
        "int": 2 ** 200, "neg": -7, "bool": True, "zero": False, "none": None,
        "float": 0.1, "nan": float("nan"), "inf": float("inf"), "minf": float("-inf"),
        "negzero": -0.0, "bytes": b"\x00\xffab", "set": {(1, 2), (3, 4)},
        "frozen": frozenset({"a"}), (1, "k"): "tuple key", frozenset({1}): "frozenset key",
        "text": "é\n\u2028\"'\\ \x00", "tuple": (1, (2, [3])),
    }

def echo(*args, **kwargs):
    return kwargs if kwargs else args[0]

def gen(n):
    yield from range(n)

def deep(n):
    x = []
    for _ in range(n):
        x = [x]
    return x

def loud(x):
    print("printing from the solution", x)
    print("to stderr too", file=sys.stderr)
    sys.stdout.write('{"op": "done"}\n')
    return x

def big():
    return list(range(50000))

_same = object()
def same():
    return _same
`

func TestVerifyValuesCross(t *testing.T) {
	runKind(t, valuesTask, []kindCase{
		{name: "exact values", solution: goodValues, rule: reward.RulePassed},
		{name: "an int subclass where the test wants exactly an int", rule: reward.RuleAssertion,
			solution: goodValues + "class I(int):\n    pass\n_values = values\ndef values():\n    v = _values()\n    v['int'] = I(2 ** 200)\n    return v\n"},
		{name: "a wrong int subclass that equals anything", rule: reward.RuleAssertion,
			solution: goodValues + "class I(int):\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n" +
				"_values = values\ndef values():\n    v = _values()\n    v['neg'] = I(-8)\n    return v\n"},
		{name: "True where 1 belongs", rule: reward.RuleAssertion,
			solution: goodValues + "_echo = echo\ndef echo(*a, **k):\n    return True if a == (1,) else _echo(*a, **k)\n"},
		{name: "a list where a tuple belongs", rule: reward.RuleAssertion,
			solution: goodValues + "_values = values\ndef values():\n    v = _values()\n    v['tuple'] = [1, (2, [3])]\n    return v\n"},
	})
}

// ioTasks are input/output tasks, as in code-contest datasets.
var (
	sumTask = tasks.Task{ID: "sum", Statement: "Read n, then n integers; print their sum.", Cases: []tasks.Case{
		{Input: "3\n1 2 3\n", Output: "6\n"},
		{Input: "1\n-5\n", Output: "-5"},
		{Input: "0\n\n", Output: "0\n"},
		{Input: "4\n1000000000000 1000000000000 1 -1\n", Output: "2000000000000\n"},
	}}
	reverseTask = tasks.Task{ID: "reverse", Statement: "Print each line with its words in reverse order.", Cases: []tasks.Case{
		{Input: "hello world\n", Output: "world hello\n"},
		{Input: "a b c\nd e\n", Output: "c b a\r\ne d  \n\n\n"},
		{Input: "", Output: ""},
		{Input: "  spaced   out  \n", Output: "out spaced\n"},
	}}
)

func TestVerifyInputOutputTasks(t *testing.T) {
	t.Run("sum", func(t *testing.T) {
		runKind(t, sumTask, []kindCase{
			{name: "correct", rule: reward.RulePassed,
				solution: "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:1 + int(data[0])])))\n"},
			{name: "correct, with trailing white space and CRLF", rule: reward.RulePassed,
				solution: "import sys\ndata = sys.stdin.read().split()\nsys.stdout.write(str(sum(map(int, data[1:]))) + '  \\r\\n\\n')\n"},
			{name: "off by one", rule: reward.RuleWrongOutput,
				solution: "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[2:])))\n"},
			{name: "hard-coded first case", rule: reward.RuleWrongOutput, solution: "print(6)\n"},
			{name: "crashes", rule: reward.RuleFailed, solution: "raise ValueError('no')\n"},
			{name: "prints the answer, then fails", rule: reward.RuleFailed,
				solution: "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\nsys.exit(1)\n"},
			{name: "an empty program", rule: reward.RuleWrongOutput, solution: ""},
		})
	})
	t.Run("reverse", func(t *testing.T) {
		runKind(t, reverseTask, []kindCase{
			{name: "correct", rule: reward.RulePassed,
				solution: "import sys\nfor line in sys.stdin:\n    print(' '.join(reversed(line.split())))\n"},
			{name: "reverses characters", rule: reward.RuleWrongOutput,
				solution: "import sys\nfor line in sys.stdin:\n    print(line.rstrip('\\n')[::-1])\n"},
			{name: "never ends", rule: reward.RuleFailed, solution: "while True:\n    pass\n", timeout: time.Second},
		})
	})
}

func TestVerifyInputOutputReport(t *testing.T) {
	f := dirFactory{t}
	v := verifyWork(t, f, sumTask, agentWork{"solution.py": "print(6)\n"})
	require.Equal(t, reward.RuleWrongOutput, v.Rule)
	require.Equal(t, 4, v.Cases)
	require.Equal(t, 1, v.CasesPassed)
	require.Contains(t, v.Reason, "case 2 of 4")
	require.Contains(t, v.Output, "--- expected ---\n-5\n--- got ---\n6\n")

	v = verifyWorkWith(t, f, reverseTask, agentWork{"solution.py": "while True:\n    pass\n"}, reward.VerifyOptions{Timeout: time.Second})
	require.True(t, v.TimedOut)
	require.Equal(t, 0, v.CasesPassed)

	v = verifyWork(t, f, sumTask, agentWork{"main.py": "print(6)\n"})
	require.Equal(t, reward.RuleFailed, v.Rule, "no solution.py")
	require.Equal(t, 2, v.ExitCode, v.SolutionOutput)

	// A task with both test code and cases needs both.
	both := sumTask
	both.TestCode = "print('All tests passed!')\n"
	v = verifyWork(t, f, both, agentWork{"solution.py": "print(6)\n"})
	require.Equal(t, reward.RuleWrongOutput, v.Rule)
	v = verifyWork(t, f, both, agentWork{"solution.py": "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))\n"})
	require.Equal(t, reward.RulePassed, v.Rule)
	require.Equal(t, 4, v.CasesPassed)
}

func TestSameOutput(t *testing.T) {
	for _, tc := range []struct {
		got, want string
		same      bool
	}{
		{"1\n", "1", true},
		{"1  \r\n2\t\n\n\n", "1\n2", true},
		{"", "\n\n", true},
		{"a b\n", "a  b\n", false},
		{" 1\n", "1\n", false},
		{"1\n\n2\n", "1\n2\n", false},
		{"1\n", "2\n", false},
	} {
		require.Equal(t, tc.same, reward.SameOutput(tc.got, tc.want), "%q vs %q", tc.got, tc.want)
	}
}

// inPlaceTask tests functions that change their arguments in place, as LeetCode's "do
// not return anything, modify nums in-place" tasks do: the tests' own objects must
// change as if the solution ran in their process.
var inPlaceTask = tasks.Task{ID: "in_place", TestCode: `from solution import sort_colors, rotate, add_edge, tag, fail_after_clearing, Box

nums = [2, 0, 2, 1, 1, 0]
alias = nums
assert sort_colors(nums) is None
assert nums == [0, 0, 1, 1, 2, 2] and alias is nums
m = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
row = m[0]
rotate(m)
assert m == [[7, 4, 1], [8, 5, 2], [9, 6, 3]]
assert row is m[0], "rows keep their identity"
g = {1: [2]}
add_edge(g, 2, 3)
add_edge(g, 1, 3)
assert g == {1: [2, 3], 2: [3]}
seen, pair = set(), (1, [2])
tag(pair, seen=seen)
assert seen == {"tagged"} and pair == (1, [2, "tagged"])
data = [1, 2, 3]
try:
    fail_after_clearing(data)
except ValueError:
    pass
assert data == []
b = Box()
items = [3, 1, 2]
b.put_sorted(items)
assert items == [1, 2, 3]
print("All tests passed!")
`, HiddenTests: `from solution import sort_colors
for n in range(0, 30):
    nums = [(i * 7) % 3 for i in range(n)]
    sort_colors(nums)
    assert nums == sorted((i * 7) % 3 for i in range(n))
`}

const goodInPlace = `def sort_colors(nums):
    nums.sort()

def rotate(m):
    n = len(m)
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j], m[j][i] = m[j][i], m[i][j]
    for r in m:
        r.reverse()

def add_edge(g, a, b):
    g.setdefault(a, []).append(b)

def tag(pair, seen):
    pair[1].append("tagged")
    seen.add("tagged")

def fail_after_clearing(data):
    data.clear()
    raise ValueError("cleared")

class Box:
    def put_sorted(self, items):
        items.sort()
`

func TestVerifyInPlaceArguments(t *testing.T) {
	runKind(t, inPlaceTask, []kindCase{
		{name: "correct", solution: goodInPlace, rule: reward.RulePassed},
		{name: "a sorted copy instead of sorting in place", rule: reward.RuleAssertion,
			solution: goodInPlace + "def sort_colors(nums):\n    return sorted(nums)\n"},
		{name: "rotated the other way", rule: reward.RuleAssertion,
			solution: goodInPlace + "def rotate(m):\n    m[:] = [list(r) for r in zip(*m)][::-1]\n"},
		{name: "a dict argument left as it was", rule: reward.RuleAssertion,
			solution: goodInPlace + "def add_edge(g, a, b):\n    g = dict(g)\n    g.setdefault(a, []).append(b)\n"},
	})
}

// subclassTask tests results of the standard library's subclasses of plain types
// (Counter, defaultdict, OrderedDict, namedtuple, IntEnum), dict views and bytearray,
// which compare by their contents in the tests' process too.
var subclassTask = tasks.Task{ID: "subclasses", TestCode: `from solution import counts, graph, ordered, point, color, words, keys, items, raw, points, by_point

assert counts("abca") == {"a": 2, "b": 1, "c": 1}
c = counts("aab")
assert c["a"] == 2 and c.most_common(1) == [("a", 2)]
assert {"a": 2, "b": 1} == c and not (c != {"a": 2, "b": 1})
assert graph([(1, 2), (1, 3)]) == {1: [2, 3]}
assert ordered() == {"x": 1, "y": 2}
p = point()
assert p == (1, 2) and p.x == 1 and sorted([point(), (0, 5)]) == [(0, 5), (1, 2)]
assert p in {(1, 2)} and (1, 2) in {p}
assert color() == 2 and [color()] == [2]
assert words() == ["a", "b"]
assert keys() == {1, 2} and items() == {(1, "a"), (2, "b")} and raw() == b"ab"
assert points() == {(1, 2), (3, 4)} and by_point() == {(1, 2): "p"}
print("All tests passed!")
`, HiddenTests: `from solution import counts
assert counts("") == {}
assert counts("zz") == {"z": 2}
`}

const goodSubclasses = `import collections, enum

def counts(s):
    return collections.Counter(s)

def graph(edges):
    g = collections.defaultdict(list)
    for a, b in edges:
        g[a].append(b)
    return g

def ordered():
    return collections.OrderedDict([("y", 2), ("x", 1)])

Point = collections.namedtuple("Point", "x y")

def point():
    return Point(1, 2)

class Color(enum.IntEnum):
    RED = 1
    GREEN = 2

def color():
    return Color.GREEN

class Words(list):
    pass

def words():
    return Words(["a", "b"])

def keys():
    return {1: "a", 2: "b"}.keys()

def items():
    return {1: "a", 2: "b"}.items()

def raw():
    return bytearray(b"ab")

def points():
    return {Point(1, 2), Point(3, 4)}

def by_point():
    return {Point(1, 2): "p"}
`

func TestVerifyBuiltinSubclasses(t *testing.T) {
	runKind(t, subclassTask, []kindCase{
		{name: "correct", solution: goodSubclasses, rule: reward.RulePassed},
		{name: "wrong counts with a rigged comparison", rule: reward.RuleAssertion,
			solution: goodSubclasses + "class C(collections.Counter):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n" +
				"def counts(s):\n    return C('zzz')\n"},
		{name: "a rigged str subclass for a list element", rule: reward.RuleAssertion,
			solution: goodSubclasses + "class S(str):\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n" +
				"def words():\n    return Words([S('x'), S('y')])\n"},
		{name: "an object that lies about its class", rule: reward.RuleAssertion,
			solution: anything + goodSubclasses + "class Liar(Anything):\n    __class__ = property(lambda s: dict)\n" +
				"def ordered():\n    return Liar()\n"},
	})
}

// accountTask tests exception classes of the solution: the tests catch them by name.
var accountTask = tasks.Task{ID: "account", TestCode: `import solution
from solution import Account, InsufficientFunds, AccountError

a = Account(10)
try:
    a.withdraw(50)
except InsufficientFunds as e:
    assert e.args == (40,) and isinstance(e, AccountError) and isinstance(e, ValueError)
    assert type(e) is InsufficientFunds and type(e).__name__ == "InsufficientFunds"
else:
    raise AssertionError("no InsufficientFunds")
try:
    a.withdraw(-1)
except InsufficientFunds:
    raise AssertionError("the wrong error")
except AccountError:
    pass
assert a.withdraw(4) == 6
assert solution.InsufficientFunds is InsufficientFunds and issubclass(InsufficientFunds, AccountError)
print("All tests passed!")
`}

const goodAccount = `class AccountError(ValueError):
    pass

class InsufficientFunds(AccountError):
    pass

class Account:
    def __init__(self, balance):
        self.balance = balance
    def withdraw(self, n):
        if n < 0:
            raise AccountError("negative")
        if n > self.balance:
            raise InsufficientFunds(n - self.balance)
        self.balance -= n
        return self.balance
`

func TestVerifyExceptionClassesOfTheSolution(t *testing.T) {
	runKind(t, accountTask, []kindCase{
		{name: "correct", solution: goodAccount, rule: reward.RulePassed},
		{name: "raises the base class", rule: reward.RuleAssertion,
			solution: goodAccount + "InsufficientFunds = AccountError\n"},
		{name: "an exception class that claims to be another", rule: reward.RuleFailed,
			solution: goodAccount + "class Fake(ValueError):\n    __name__ = 'InsufficientFunds'\n" +
				"def _w(self, n):\n    raise Fake(40)\nAccount.withdraw = _w\n"},
	})
}
