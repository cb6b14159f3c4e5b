package tasks

// Builtin returns the eight built-in tasks, in a fixed order: fizzbuzz, is_palindrome,
// two_sum, flatten, longest_common_prefix, group_anagrams, valid_parentheses and
// merge_intervals. Their signatures and test cases are those of the Hermes agentic OPD
// environment, and each adds [Task.HiddenTests] of its own (at least five assertions,
// edge cases included) that the prompt does not show, so that a solution hard-coding
// the visible answers fails. Each carries a [Task.ReferenceSolution]. The result is a
// fresh slice the caller may modify.
func Builtin() []Task {
	out := make([]Task, len(builtins))
	copy(out, builtins)
	return out
}

func builtin(id, difficulty, statement, tests, hidden, solution string) Task {
	return Task{
		ID:                id,
		Statement:         statement,
		TestCode:          tests,
		HiddenTests:       hidden,
		Difficulty:        difficulty,
		Language:          LanguagePython,
		ReferenceSolution: solution,
	}
}

var builtins = []Task{
	builtin("fizzbuzz", "easy",
		"Write a Python function `fizzbuzz(n)` that returns a list of strings for the "+
			"numbers 1 to n inclusive: \"Fizz\" for multiples of 3, \"Buzz\" for multiples "+
			"of 5, \"FizzBuzz\" for multiples of both 3 and 5, and the number itself as a "+
			"string otherwise.",
		`from solution import fizzbuzz

assert fizzbuzz(15) == ['1', '2', 'Fizz', '4', 'Buzz', 'Fizz', '7', '8', 'Fizz', 'Buzz', '11', 'Fizz', '13', '14', 'FizzBuzz']
assert fizzbuzz(1) == ['1']
assert fizzbuzz(0) == []
print("All tests passed!")
`,
		`from solution import fizzbuzz

assert fizzbuzz(2) == ['1', '2']
assert fizzbuzz(3) == ['1', '2', 'Fizz']
assert fizzbuzz(5)[-1] == 'Buzz'
assert fizzbuzz(16) == fizzbuzz(15) + ['16']
big = fizzbuzz(100)
assert len(big) == 100
assert big[29] == 'FizzBuzz' and big[26] == 'Fizz' and big[24] == 'Buzz' and big[97] == '98'
`,
		`def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        if i % 15 == 0:
            out.append("FizzBuzz")
        elif i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out
`),
	builtin("is_palindrome", "easy",
		"Write a Python function `is_palindrome(s)` that returns True when the string s "+
			"reads the same forwards and backwards once letter case is ignored and every "+
			"character that is not a letter or a digit is removed, and False otherwise.",
		`from solution import is_palindrome

assert is_palindrome('A man, a plan, a canal: Panama') == True
assert is_palindrome('race a car') == False
assert is_palindrome('') == True
assert is_palindrome('Was it a car or a cat I saw?') == True
print("All tests passed!")
`,
		`from solution import is_palindrome

assert is_palindrome('a') == True
assert is_palindrome('ab') == False
assert is_palindrome('No lemon, no melon') == True
assert is_palindrome('0P') == False
assert is_palindrome('.,') == True
assert is_palindrome('Aa') == True
assert is_palindrome('abcba1') == False
`,
		`def is_palindrome(s):
    kept = [c.lower() for c in s if c.isalnum()]
    return kept == kept[::-1]
`),
	builtin("two_sum", "easy",
		"Write a Python function `two_sum(nums, target)` that returns the indices of the "+
			"two numbers in the list nums that add up to target, as a list [i, j] with "+
			"i < j. Every input has exactly one solution, and the same element may not be "+
			"used twice.",
		`from solution import two_sum

assert two_sum([2, 7, 11, 15], 9) == [0, 1]
assert two_sum([3, 2, 4], 6) == [1, 2]
assert two_sum([3, 3], 6) == [0, 1]
print("All tests passed!")
`,
		`from solution import two_sum

assert two_sum([1, 5, 3, 7], 12) == [1, 3]
assert two_sum([-3, 4, 3, 90], 0) == [0, 2]
assert two_sum([0, 4, 3, 0], 0) == [0, 3]
assert two_sum([5, 75, 25], 100) == [1, 2]
assert two_sum(list(range(1000)), 1997) == [998, 999]
`,
		`def two_sum(nums, target):
    seen = {}
    for j, x in enumerate(nums):
        if target - x in seen:
            return [seen[target - x], j]
        seen.setdefault(x, j)
    return []
`),
	builtin("flatten", "medium",
		"Write a Python function `flatten(lst)` that flattens a list nested to any depth "+
			"into a flat list, keeping the order of the elements: for example "+
			"[1, [2, [3, 4], 5]] becomes [1, 2, 3, 4, 5].",
		`from solution import flatten

assert flatten([1, [2, [3, 4], 5]]) == [1, 2, 3, 4, 5]
assert flatten([]) == []
assert flatten([1, 2, 3]) == [1, 2, 3]
assert flatten([[[[1]]]]) == [1]
assert flatten([1, [2], [[3]], [[[4]]]]) == [1, 2, 3, 4]
print("All tests passed!")
`,
		`from solution import flatten

assert flatten([[]]) == []
assert flatten([[], [[]], [1, []]]) == [1]
assert flatten(['a', ['b', ['c']]]) == ['a', 'b', 'c']
assert flatten([None, [0, [False]]]) == [None, 0, False]
assert flatten([1, [2, [3, [4, [5, [6, [7, [8]]]]]]]]) == [1, 2, 3, 4, 5, 6, 7, 8]
deep = [0]
for i in range(30):
    deep = [deep, i + 1]
assert flatten(deep) == list(range(31))
`,
		`def flatten(lst):
    out = []
    for item in lst:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
`),
	builtin("longest_common_prefix", "easy",
		"Write a Python function `longest_common_prefix(strs)` that returns the longest "+
			"string that every string in the list strs starts with, or the empty string "+
			"when there is none (including when the list is empty).",
		`from solution import longest_common_prefix

assert longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'
assert longest_common_prefix(['dog', 'racecar', 'car']) == ''
assert longest_common_prefix(['interspecies', 'interstellar', 'interstate']) == 'inters'
assert longest_common_prefix(['a']) == 'a'
assert longest_common_prefix([]) == ''
print("All tests passed!")
`,
		`from solution import longest_common_prefix

assert longest_common_prefix(['', 'abc']) == ''
assert longest_common_prefix(['abc', 'abc']) == 'abc'
assert longest_common_prefix(['ab', 'a']) == 'a'
assert longest_common_prefix(['prefix', 'pre', 'prepare']) == 'pre'
assert longest_common_prefix(['c', 'acc', 'ccc']) == ''
assert longest_common_prefix(['same'] * 5) == 'same'
`,
		`def longest_common_prefix(strs):
    if not strs:
        return ""
    prefix = strs[0]
    for s in strs[1:]:
        while not s.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
`),
	builtin("group_anagrams", "medium",
		"Write a Python function `group_anagrams(strs)` that groups the strings of the list "+
			"strs that are anagrams of each other and returns the groups as a list of lists. "+
			"Neither the order of the groups nor the order within a group matters.",
		`from solution import group_anagrams

result = group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat', 'bat'])
result = sorted(sorted(group) for group in result)
assert result == [['ate', 'eat', 'tea'], ['bat'], ['nat', 'tan']]
assert group_anagrams([]) == []
assert group_anagrams(['a']) == [['a']]
print("All tests passed!")
`,
		`from solution import group_anagrams

def norm(groups):
    return sorted(sorted(group) for group in groups)

assert norm(group_anagrams(['', ''])) == [['', '']]
assert norm(group_anagrams(['ab', 'ba', 'abc'])) == [['ab', 'ba'], ['abc']]
assert norm(group_anagrams(['a', 'b', 'a'])) == [['a', 'a'], ['b']]
assert norm(group_anagrams(['listen', 'silent', 'enlist', 'google', 'gooegl'])) == [['enlist', 'listen', 'silent'], ['gooegl', 'google']]
assert norm(group_anagrams(['abc', 'abd'])) == [['abc'], ['abd']]
assert norm(group_anagrams(['aab', 'abb'])) == [['aab'], ['abb']]
`,
		`def group_anagrams(strs):
    groups = {}
    for s in strs:
        groups.setdefault("".join(sorted(s)), []).append(s)
    return list(groups.values())
`),
	builtin("valid_parentheses", "easy",
		"Write a Python function `valid_parentheses(s)` that returns True when the string s, "+
			"made only of the characters ()[]{}, is balanced: every opening bracket is closed "+
			"by a bracket of the same type, and brackets close in the right order. The "+
			"empty string is balanced.",
		`from solution import valid_parentheses

assert valid_parentheses('()') == True
assert valid_parentheses('()[]{}') == True
assert valid_parentheses('(]') == False
assert valid_parentheses('([)]') == False
assert valid_parentheses('{[]}') == True
assert valid_parentheses('') == True
print("All tests passed!")
`,
		`from solution import valid_parentheses

assert valid_parentheses('(') == False
assert valid_parentheses(')') == False
assert valid_parentheses('((()))[]{}') == True
assert valid_parentheses('([{}])') == True
assert valid_parentheses('(((') == False
assert valid_parentheses('())') == False
assert valid_parentheses('][') == False
`,
		`def valid_parentheses(s):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for c in s:
        if c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return False
        else:
            stack.append(c)
    return not stack
`),
	builtin("merge_intervals", "medium",
		"Write a Python function `merge_intervals(intervals)` that merges every overlapping "+
			"interval of the list intervals, each a list [start, end], and returns the merged "+
			"intervals sorted by start. Intervals that touch (one ends where the next starts) "+
			"overlap, and the input may be in any order.",
		`from solution import merge_intervals

assert merge_intervals([[1, 3], [2, 6], [8, 10], [15, 18]]) == [[1, 6], [8, 10], [15, 18]]
assert merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]
assert merge_intervals([[1, 4], [0, 4]]) == [[0, 4]]
assert merge_intervals([]) == []
assert merge_intervals([[1, 2]]) == [[1, 2]]
print("All tests passed!")
`,
		`from solution import merge_intervals

assert merge_intervals([[1, 10], [2, 3], [4, 5]]) == [[1, 10]]
assert merge_intervals([[5, 6], [1, 2]]) == [[1, 2], [5, 6]]
assert merge_intervals([[1, 2], [3, 4]]) == [[1, 2], [3, 4]]
assert merge_intervals([[2, 3], [2, 2], [3, 3], [1, 3], [5, 7], [2, 2], [4, 6]]) == [[1, 3], [4, 7]]
assert merge_intervals([[0, 0], [0, 0]]) == [[0, 0]]
assert merge_intervals([[-5, -1], [-2, 3]]) == [[-5, 3]]
`,
		`def merge_intervals(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out
`),
}
