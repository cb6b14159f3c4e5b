# The test side. It runs the task's test scripts (the file names in sys.argv) in a
# sandbox of their own; it never loads the solution's code. "import solution" there
# gives a proxy module: every attribute read, call and operation on it or on what it
# returns is a request to the verifier, which relays it to the solution process and
# relays back plain data, an exception, or a handle. The protocol runs on this
# process's original stdin and stdout; the tests' own prints go to stderr. When every
# script has run to its end, "done" goes to the verifier on that channel, which only
# this process holds.
def _tests_main():
    import _thread, builtins, importlib.machinery, os, sys, types

    pin = open(os.dup(0), "rb")
    pout = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def send(msg):
        data = dumps(msg)
        if len(data) > MAX_LINE + 1:
            # Said to the verifier, which names the limit in its reason, and raised in
            # the tests, which may handle it.
            send({"op": "over_limit", "size": len(data) - 1})
            raise OverflowError("a request of %d bytes is over the verifier's message limit of %d bytes "
                                "(reward.MaxMessage)" % (len(data) - 1, MAX_LINE))
        while data:
            data = data[os.write(pout, data):]

    def stop(why):
        # The channel to the solution is broken: nothing after this can be trusted.
        try:
            sys.stderr.write("\n[verifier] " + why + "\n")
            sys.stderr.flush()
        finally:
            os._exit(3)

    seq = [0]
    remotes = {}
    # Tests may call the solution from several threads. Re-entrant: decoding a reply
    # may hash or compare a handle in a set or a dict key, which asks the solution
    # for its contents (the reply before was read in full, so a request may nest).
    lock = _thread.RLock()

    classes = {}  # handle → the tests' class for an exception class of the solution
    class_handles = {}

    def remote(h):
        if type(h) is tuple:
            return exception_class(*h)
        r = remotes.get(h)
        if r is None:
            r = remotes[h] = Remote(h)
        return r

    def exception_class(h, base, name):
        # A class of the tests' own, named like the solution's and deriving from the
        # same builtin exception, made once per class: no code of the solution's.
        c = classes.get(h)
        if c is None:
            if type(base) is str:
                b = getattr(builtins, base, None)
                if not (isinstance(b, type) and issubclass(b, Exception) and b.__name__ == base):
                    raise BadValue("not a builtin exception: %r" % base)
            elif base in class_handles and type(base) is type:
                b = base
            else:
                raise BadValue("not an exception class")
            if name == base:
                c = b
            elif name.isascii() and name.isidentifier():
                c = type(name, (b,), {"__module__": "solution", "__qualname__": name})
            else:
                raise BadValue("not a class name: %r" % name)
            classes[h] = c
            class_handles.setdefault(c, h)
        return c

    def local(x):
        if type(x) is Remote:
            return object.__getattribute__(x, "_h")
        h = class_handles.get(x) if type(x) is type else None
        if h is not None:
            return h
        raise TypeError("cannot pass a %s to the solution: only plain data (None, bool, int, float, "
                        "str, bytes, tuple, list, dict, set, frozenset, nested at most %d deep) and "
                        "objects the solution returned cross" % (type(x).__name__, MAX_DEPTH))

    def request(op, h=0, **kw):
        with lock:
            return exchange(op, h, kw)

    def exchange(op, h, kw):
        passed = kw.pop("passed", None)
        seq[0] += 1
        kw.update(id=seq[0], op=op, h=h)
        send(kw)
        line = pin.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            stop("the verifier ended the conversation")
        try:
            msg = loads(line)
        except (ValueError, RecursionError):
            bad("a reply that is not JSON")
        if type(msg) is not dict or msg.get("id") != seq[0] or len(msg) != 2 + ("out" in msg):
            bad("a malformed reply")
        try:
            if "out" in msg:
                refill_arguments(passed, msg["out"])
            if "ok" in msg:
                return decode(msg["ok"], remote)
            if "exc" in msg:
                exc = exception(msg["exc"])
            elif "fault" in msg:
                stop("the solution process failed: %s" % msg["fault"])
            else:
                bad("a malformed reply")
        except BadValue as e:
            bad("a malformed value: %s" % e)
        if isinstance(exc, (StopIteration, StopAsyncIteration)) and not (op == "op" and kw.get("name") == "next"):
            # Only next() may end an iteration: from any other call, StopIteration would
            # silently end a map() or filter() the tests iterate over (as PEP 479 says
            # for generators).
            raise RuntimeError("the solution raised %s outside next()" % type(exc).__name__) from exc
        raise exc

    def refill_arguments(passed, out):
        # The solution changed some arguments of a call in place: make the tests' own
        # objects equal to what they became, keeping their identity.
        if passed is None or type(out) is not list:
            raise BadValue("changed arguments of a request that passed none")
        args, kwargs = passed
        for item in out:
            if type(item) is not list or len(item) != 2:
                raise BadValue("not a changed argument")
            key, v = item
            if type(key) is int and 0 <= key < len(args):
                a = args[key]
            elif type(key) is str and key in kwargs:
                a = kwargs[key]
            else:
                raise BadValue("a changed argument that was not passed")
            refill(a, decode(v, remote))

    def refill(a, v):
        t = type(a)
        if type(v) is not t:
            raise BadValue("an argument changed its type")
        if t is list:
            if len(a) != len(v):
                a[:] = v
                return
            for i, (x, y) in enumerate(zip(a, v)):
                if type(x) in (list, dict, set) and type(y) is type(x):
                    refill(x, y)
                else:
                    a[i] = y
        elif t is dict or t is set:
            a.clear()
            a.update(v)
        elif t is tuple:
            # Immutable itself: only the containers in it can have changed.
            if len(a) != len(v):
                raise BadValue("a tuple argument changed its length")
            for x, y in zip(a, v):
                if type(x) in (list, dict, set, tuple):
                    refill(x, y)
        else:
            raise BadValue("an argument that cannot change changed")

    def bad(why):
        send({"op": "bad_reply", "why": why})
        stop("the verifier sent " + why)

    def exception(v):
        # [name, args], [name, args, class] or [name, args, class or None, attributes].
        if type(v) is not list or len(v) not in (2, 3, 4) or type(v[0]) is not str:
            raise BadValue("not an exception")
        cls = getattr(builtins, v[0], None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise BadValue("not a builtin exception: %r" % v[0])
        if len(v) >= 3 and v[2] is not None:
            # An exception class of the solution, which the tests may catch by name.
            if type(v[2]) is not list or v[2][:1] != ["x"]:
                raise BadValue("not an exception class")
            own = decode(v[2], remote)
            if not issubclass(own, cls):
                raise BadValue("an exception class that does not derive from %s" % v[0])
            cls = own
        args = decode(v[1], remote)
        if type(args) is not tuple:
            raise BadValue("exception arguments are not a tuple")
        e = None
        for c in cls.__mro__:
            try:
                e = c(*args)
                break
            except Exception:
                continue
        if e is None:
            e = Exception(*args)
        if len(v) == 4:
            set_attributes(e, v[3])
        return e

    def set_attributes(e, attrs):
        # The attributes the solution's exception carried (e.shortfall), as plain data
        # or handles; never one its class already has, so no method is shadowed.
        if type(attrs) is not list or not attrs:
            raise BadValue("exception attributes are not a list")
        for item in attrs:
            if type(item) is not list or len(item) != 2 or type(item[0]) is not str:
                raise BadValue("not an exception attribute")
            name = item[0]
            if not (name.isascii() and name.isidentifier() and len(name) <= 100) or name.startswith("__"):
                raise BadValue("not an attribute name: %r" % name)
            value = decode(item[1], remote)
            if not hasattr(type(e), name):
                setattr(e, name, value)

    def enc(x):
        return encode(x, local)

    def op(name, h, *args, want=None):
        r = request("op", h, name=name, args=[enc(a) for a in args])
        if want is not None and type(r) is not want:
            raise TypeError("%s() of a solution object returned %s, not %s" % (name, type(r).__name__, want.__name__))
        return r

    NONE = object()

    def contents(r):
        # An object of a subclass of a plain type (Counter, namedtuple, IntEnum) is
        # compared by its contents, as that plain type, here: what the subclass does
        # to comparison never counts. Any other object has none (NONE): it equals only
        # itself.
        v = op("value", object.__getattribute__(r, "_h"))
        if type(v) is tuple and len(v) == 1:
            return v[0]
        if type(v) is not tuple or v:
            raise TypeError("value() of a solution object returned %s" % type(v).__name__)
        return NONE

    def order(r, other, cmp):
        a = contents(r)
        b = contents(other) if type(other) is Remote else other
        if a is NONE or b is NONE:
            return NotImplemented
        return cmp(a, b)

    class Remote:
        # An object of the solution process. It equals only itself; attribute reads,
        # calls and the operations below are forwarded.
        __slots__ = ("_h", "__weakref__")

        def __init__(self, h):
            object.__setattr__(self, "_h", h)

        def __getattr__(self, name):
            if name.startswith("__") and name not in ("__name__", "__qualname__", "__doc__"):
                raise AttributeError(name)
            return request("getattr", self._h, name=name)

        def __setattr__(self, name, value):
            request("setattr", self._h, name=name, v=enc(value))

        def __delattr__(self, name):
            request("delattr", self._h, name=name)

        def __call__(self, *args, **kwargs):
            return request("call", self._h, args=[enc(a) for a in args],
                           kwargs=[[k, enc(v)] for k, v in kwargs.items()], passed=(args, kwargs))

        def __eq__(self, other):
            if self is other:
                return True
            a = contents(self)
            b = contents(other) if type(other) is Remote else other
            return a is not NONE and b is not NONE and a == b

        def __ne__(self, other):
            return not self.__eq__(other)

        def __hash__(self):
            v = contents(self)
            if v is not NONE:
                try:
                    return hash(v)
                except TypeError:
                    pass
            return object.__hash__(self)

        def __lt__(self, other):
            return order(self, other, lambda a, b: a < b)

        def __le__(self, other):
            return order(self, other, lambda a, b: a <= b)

        def __gt__(self, other):
            return order(self, other, lambda a, b: a > b)

        def __ge__(self, other):
            return order(self, other, lambda a, b: a >= b)

        def __bool__(self):
            return op("bool", self._h, want=bool)

        def __len__(self):
            return op("len", self._h, want=int)

        def __str__(self):
            return op("str", self._h, want=str)

        def __repr__(self):
            return op("repr", self._h, want=str)

        def __iter__(self):
            return op("iter", self._h)

        def __next__(self):
            return op("next", self._h)

        def __getitem__(self, k):
            return op("getitem", self._h, k)

        def __setitem__(self, k, v):
            op("setitem", self._h, k, v)

        def __delitem__(self, k):
            op("delitem", self._h, k)

        def __contains__(self, x):
            return op("contains", self._h, x, want=bool)

        def __instancecheck__(self, x):
            # isinstance(x, cls) with cls a class of the solution. An object of the
            # tests cannot be an instance of it.
            if type(x) is not Remote:
                try:
                    enc(x)
                except TypeError:
                    return False
            return op("isinstance", self._h, x, want=bool)

    class RemoteModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__") and name != "__all__":
                raise AttributeError(name)
            return request("getattr", 0, name=name)

    class Loader:
        def create_module(self, spec):
            return RemoteModule(spec.name)

        def exec_module(self, module):
            request("import")

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "solution":
                return importlib.machinery.ModuleSpec(name, Loader())
            return None

    sys.meta_path.insert(0, Finder)
    send({"op": "hello"})  # the harness started; the tests start now
    scripts = sys.argv[1:]
    for path in scripts:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
        main = types.ModuleType("__main__")
        main.__file__ = path
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        sys.argv = [path]
        try:
            exec(code, main.__dict__)
        except SystemExit as e:
            if not (e.code is None or e.code is False or e.code == 0):
                raise
    send({"op": "done"})


_tests_main()
