"""toycalc: a small package with known bugs, the repository of agenticopd's SWE-style test tasks."""

from toycalc.arith import add, clamp, mul, sub
from toycalc.text import word_count

__all__ = ["add", "clamp", "mul", "sub", "word_count"]
