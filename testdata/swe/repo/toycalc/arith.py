"""Arithmetic helpers."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def sub(a, b):
    """Return a minus b."""
    return a - b


def mul(a, b):
    """Return the product of a and b."""
    return a * b


def clamp(x, lo, hi):
    """Return x limited to the closed range [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x
