# Compiles the harnesses whose sources are the arguments, for the verifier's cache: writes
# this interpreter's bytecode magic number (as harness/boot.py reads it), then for each
# harness its length (four bytes, little-endian) and its code as compile() makes it for
# `python3 -c` (marshal). It runs in a fresh sandbox of the tests, before any test.
import marshal, os, sys

out = [sys.modules["_frozen_importlib_external"].MAGIC_NUMBER]
for src in sys.argv[1:]:
    b = marshal.dumps(compile(src, "<string>", "exec", dont_inherit=True))
    out += [len(b).to_bytes(4, "little"), b]
data = b"".join(out)
while data:
    data = data[os.write(1, data):]
