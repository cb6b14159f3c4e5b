# Plain data between the test process and the solution process. Shared by both sides.
#
# A value is JSON: null, true, false, or [tag, payload]:
#   ["i", hex(int)]            int (exactly int: bool and int subclasses are not)
#   ["f", float.hex()]         float (nan, inf and -0.0 included)
#   ["s", str]                 str
#   ["y", bytes.hex()]         bytes
#   ["t"|"l"|"S"|"F", [v...]]  tuple, list, set, frozenset
#   ["d", [[k, v]...]]         dict
#   ["h", n]                   a handle: any other object, kept by the side that owns it
#   ["x", [n, base, name]]     an exception class of the solution (handle n): the test
#                              side makes a class of that name deriving from base (the
#                              name of a builtin exception, or the parent class as
#                              ["x", ...]), so that "except Name" works
# Encoding checks exact types (type(x) is int, not isinstance), so an object of a user
# class never passes as plain data, whatever it claims. Decoding accepts the canonical
# form only and rebuilds every value from builtin types.
#
# MAX_DEPTH (containers nest at most this deep; deeper ones cross as handles) and
# MAX_LINE (a message's bytes, its newline not counted) come from the Go constants
# reward.MaxDepth and reward.MaxMessage: the verifier puts them before this file.
import builtins as _builtins
import sys as _sys

# Values MAX_DEPTH deep take about two frames per level to decode or encode, and the
# JSON scanner two more; the solution's own calls come on top.
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 4 * MAX_DEPTH + 1000))


class BadValue(Exception):
    pass


_SEQ = {tuple: "t", list: "l", set: "S", frozenset: "F"}
_MAKE = {"t": tuple, "l": list, "S": set, "F": frozenset}


def encode(x, handle, depth=0):
    t = type(x)
    if x is None or t is bool:
        return x
    if t is int:
        return ["i", hex(x)]
    if t is float:
        return ["f", x.hex()]
    if t is str:
        return ["s", x]
    if t is bytes:
        return ["y", x.hex()]
    if depth < MAX_DEPTH:
        tag = _SEQ.get(t)
        if tag is not None:
            return [tag, [encode(v, handle, depth + 1) for v in x]]
        if t is dict:
            return ["d", [[encode(k, handle, depth + 1), encode(v, handle, depth + 1)] for k, v in x.items()]]
    if t is type and issubclass(x, Exception) and depth < MAX_DEPTH:
        name = x.__name__
        if getattr(_builtins, name, None) is x:
            return ["x", [handle(x), name, name]]
        parent = x.__mro__[1]
        if getattr(_builtins, parent.__name__, None) is parent:
            base = parent.__name__
        else:
            base = encode(parent, handle, depth + 1)
            if base[0] != "x":
                return ["h", handle(x)]
        if not (name.isascii() and name.isidentifier() and len(name) <= 100):
            name = "Error"
        return ["x", [handle(x), base, name]]
    return ["h", handle(x)]


def decode(v, handle, depth=0):
    if v is None or v is True or v is False:
        return v
    if type(v) is not list or len(v) != 2 or type(v[0]) is not str or depth > MAX_DEPTH:
        raise BadValue("not a value")
    tag, p = v
    tp = type(p)
    try:
        if tag == "i" and tp is str:
            x = int(p, 16)
            if hex(x) == p:
                return x
        elif tag == "f" and tp is str:
            x = float.fromhex(p)
            if x.hex() == p:
                return x
        elif tag == "s" and tp is str:
            return p
        elif tag == "y" and tp is str:
            x = bytes.fromhex(p)
            if x.hex() == p:
                return x
        elif tag in _MAKE and tp is list:
            return _MAKE[tag]([decode(e, handle, depth + 1) for e in p])
        elif tag == "d" and tp is list:
            d = {}
            for kv in p:
                if type(kv) is not list or len(kv) != 2:
                    raise BadValue("not a dict item")
                d[decode(kv[0], handle, depth + 1)] = decode(kv[1], handle, depth + 1)
            return d
        elif tag == "h" and tp is int and p >= 0:
            return handle(p)
        elif tag == "x" and tp is list and len(p) == 3 and type(p[0]) is int and p[0] >= 0 \
                and type(p[2]) is str:
            base = p[1] if type(p[1]) is str else decode(p[1], handle, depth + 1)
            return handle((p[0], base, p[2]))
    except (ValueError, TypeError, OverflowError) as e:
        raise BadValue(str(e)) from None
    raise BadValue("bad %r value" % tag)


# JSON through the C accelerator directly: importing the json package costs about
# 10 ms of start-up (it imports re), twice per verification.
try:
    import _json

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        memo = {}

        @staticmethod
        def parse_constant(s):
            raise ValueError("JSON constant " + s)

    _scan = _json.make_scanner(_Ctx)
    _enc = _json.make_encoder(None, None, _json.encode_basestring_ascii, None, ":", ",", False, False, False)

    def dumps(msg):
        return ("".join(_enc(msg, 0)) + "\n").encode("ascii")

    def loads(line):
        s = line.decode("utf-8")
        try:
            v, end = _scan(s, 0)
        except StopIteration:
            raise ValueError("not JSON") from None
        if s[end:].strip(" \t\r\n"):
            raise ValueError("text after the JSON value")
        return v
except (ImportError, AttributeError, TypeError):
    import json as _std

    def dumps(msg):
        return (_std.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")

    def loads(line):
        return _std.loads(line, parse_constant=_no_constant)

    def _no_constant(s):
        raise ValueError("JSON constant " + s)
