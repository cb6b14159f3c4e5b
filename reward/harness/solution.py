# The solution side. It runs in the rollout's sandbox, imports solution.py from the
# workspace and answers the requests the verifier relays from the test process: the
# protocol runs on this process's original stdin and stdout; the solution's prints go to
# stderr. It is untrusted by design: whatever it sends is checked by the verifier and
# decoded strictly by the test process, so all it can do is answer, with plain data.
def _solution_main():
    import builtins, operator, os, sys

    pin = open(os.dup(0), "rb")
    pout = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    drainer = _bound_stderr(STDERR_KEEP)
    os.dup2(2, 1)
    sys.path.append(os.getcwd())

    def send(msg):
        data = dumps(msg)
        while data:
            data = data[os.write(pout, data):]

    PLAIN = (int, float, str, bytes, tuple, list, dict, set, frozenset)
    LIKE = {bytearray: bytes, type({}.keys()): set, type({}.items()): set}
    objs = {}
    ids = {}

    def handle(x):
        h = ids.get(id(x))
        if h is None:
            h = ids[id(x)] = len(objs) + 1
            objs[h] = x
        return h

    def obj(h):
        if type(h) is tuple:  # an exception class, passed back by the tests
            h = h[0]
        if h == 0:
            if failed is not None:
                raise failed
            return module
        return objs[h]

    def dec(v):
        return decode(v, obj)

    def value(x):
        # The contents of an object of a subclass of a plain type (Counter, namedtuple,
        # IntEnum, a user's list subclass), as that plain type, in a 1-tuple; () for
        # any other object. The test side compares the contents itself, with builtin
        # types, so what the subclass does to comparison never counts.
        # bytearray and the set-like views of a dict compare like bytes and sets.
        c = LIKE.get(type(x))
        if c is None:
            c = next((c for c in type(x).__mro__ if c in PLAIN), None)
        if c is None:
            return ()
        v = c(x)
        return (v,) if type(v) is c else ()

    ops = {
        "bool": bool, "len": len, "str": str, "repr": repr, "iter": iter, "next": next,
        "getitem": operator.getitem, "setitem": operator.setitem,
        "delitem": operator.delitem, "contains": operator.contains, "value": value,
        "isinstance": lambda cls, x: isinstance(x, cls),
    }

    def answer(req):
        op, target = req["op"], obj(req["h"])
        if op == "import":
            return None
        if op == "getattr":
            name = req["name"]
            if target is module and name == "__all__" and not hasattr(module, "__all__"):
                return [n for n in dir(module) if not n.startswith("_")]
            return getattr(target, name)
        if op == "setattr":
            return setattr(target, req["name"], dec(req["v"]))
        if op == "delattr":
            return delattr(target, req["name"])
        if op == "call":
            args = [dec(a) for a in req["args"]]
            kwargs = {k: dec(v) for k, v in req["kwargs"]}
            try:
                return target(*args, **kwargs)
            finally:
                changed[:] = changes(req, args, kwargs)
        if op == "op":
            return ops[req["name"]](target, *[dec(a) for a in req["args"]])
        raise ValueError("unknown request %r" % op)

    # The arguments a call changed in place, as they are now, by position or keyword:
    # the test side makes its own objects equal to them, so that a function that sorts
    # or fills a list it was given works as it would in the tests' process.
    changed = []

    def changes(req, args, kwargs):
        out = []
        for key, a, was in [(i, a, w) for i, (a, w) in enumerate(zip(args, req["args"]))] + \
                [(k, kwargs[k], w) for k, w in req["kwargs"]]:
            if type(a) in (list, dict, set, tuple):
                now = encode(a, handle)
                if now != was:
                    out.append([key, now])
        return out

    def attributes(e):
        # The attributes an exception carries, by name, as plain data or handles: those
        # it was given (self.shortfall = ...), and the values of the properties and
        # slots of the solution's own classes, read now. The test side sets them on the
        # exception it raises.
        found = {}
        try:
            found.update(vars(e))
        except TypeError:
            pass
        for c in type(e).__mro__:
            if getattr(builtins, c.__name__, None) is c:
                continue
            for k, a in list(vars(c).items()):
                if k not in found and (isinstance(a, property) or type(a).__name__ == "member_descriptor"):
                    try:
                        found[k] = getattr(e, k)
                    except Exception:
                        pass
        return [[k, encode(v, handle)] for k, v in found.items()
                if type(k) is str and k.isascii() and k.isidentifier() and len(k) <= 100 and not k.startswith("__")]

    def builtin_type(e):
        for c in type(e).__mro__:
            if getattr(builtins, c.__name__, None) is c and issubclass(c, Exception):
                return c.__name__
        return "Exception"

    # Said before any of the solution's code runs: the harness started.
    send({"op": "hello"})
    module, failed = None, None
    try:
        import solution as module
    except Exception as e:
        failed = e

    while True:
        line = pin.readline(MAX_LINE + 1)
        if not line:
            # The tests are done: what the solution wrote to stderr is written out.
            _end_stderr(drainer, (1, 2))
            os._exit(0)
        req = loads(line)
        changed[:] = []
        try:
            out = {"id": req["id"], "ok": encode(answer(req), handle)}
        except Exception as e:
            try:
                args = encode(tuple(e.args), handle)
            except Exception:
                args = ["t", [["s", str(e)]]]
            out = {"id": req["id"], "exc": [builtin_type(e), args]}
            cls = encode(type(e), handle)
            own = cls[0] == "x" and cls[1][1] != cls[1][2]  # the tests may catch it by name
            try:
                attrs = attributes(e)
            except Exception:
                attrs = []
            if own or attrs:
                out["exc"].append(cls if own else None)
            if attrs:
                out["exc"].append(attrs)
        if changed:
            out["out"] = changed[:]
        send(out)


_solution_main()
