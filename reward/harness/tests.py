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
    lock = _thread.allocate_lock()  # tests may call the solution from several threads

    def remote(h):
        r = remotes.get(h)
        if r is None:
            r = remotes[h] = Remote(h)
        return r

    def local(x):
        if type(x) is Remote:
            return object.__getattribute__(x, "_h")
        raise TypeError("cannot pass a %s to the solution: only plain data (None, bool, int, float, "
                        "str, bytes, tuple, list, dict, set, frozenset) and objects the solution "
                        "returned cross" % type(x).__name__)

    def request(op, h=0, **kw):
        with lock:
            return exchange(op, h, kw)

    def exchange(op, h, kw):
        seq[0] += 1
        kw.update(id=seq[0], op=op, h=h)
        send(kw)
        line = pin.readline(MAX_LINE)
        if not line.endswith(b"\n"):
            stop("the verifier ended the conversation")
        try:
            msg = loads(line)
        except (ValueError, RecursionError):
            bad("a reply that is not JSON")
        if type(msg) is not dict or msg.get("id") != seq[0] or len(msg) != 2:
            bad("a malformed reply")
        try:
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

    def bad(why):
        send({"op": "bad_reply", "why": why})
        stop("the verifier sent " + why)

    def exception(v):
        if type(v) is not list or len(v) != 2 or type(v[0]) is not str:
            raise BadValue("not an exception")
        cls = getattr(builtins, v[0], None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise BadValue("not a builtin exception: %r" % v[0])
        args = decode(v[1], remote)
        if type(args) is not tuple:
            raise BadValue("exception arguments are not a tuple")
        for c in cls.__mro__:
            try:
                return c(*args)
            except Exception:
                continue
        return Exception(*args)

    def enc(x):
        return encode(x, local)

    def op(name, h, *args, want=None):
        r = request("op", h, name=name, args=[enc(a) for a in args])
        if want is not None and type(r) is not want:
            raise TypeError("%s() of a solution object returned %s, not %s" % (name, type(r).__name__, want.__name__))
        return r

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
                           kwargs=[[k, enc(v)] for k, v in kwargs.items()])

        def __eq__(self, other):
            return self is other

        def __ne__(self, other):
            return self is not other

        __hash__ = object.__hash__

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
