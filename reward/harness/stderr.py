# Bounds what the solution writes to its standard error, so that however much it
# writes, its sandbox never kills it for output: stderr becomes a pipe that a forked
# child drains. The child passes the first keep bytes on to the original stderr as
# they come, and keeps the last keep bytes after them, which it writes when the pipe
# closes (when the solution and its children ended; a process killed early shows its
# head only). Stderr never decides a verdict; it is only shown. Where no pipe or
# process can be made, stderr stays as it is (and the sandbox's output cap applies).
def _bound_stderr(keep):
    # Returns the drainer's pid (None where stderr stays as it is), for _end_stderr.
    import os

    try:
        r, w = os.pipe()
    except OSError:
        return None  # no room for a pipe: stderr stays as it is
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None  # no room for a process: stderr stays as it is
    if pid != 0:
        os.close(r)
        os.dup2(w, 2)
        os.close(w)
        return pid
    try:
        os.close(w)
        os.dup2(r, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        # Only the pipe is kept (closerange over every possible descriptor costs
        # milliseconds where close_range is not allowed).
        try:
            fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
        except (OSError, ValueError):
            fds = range(3, 1024)
        for fd in fds:
            if fd > 2:
                try:
                    os.close(fd)
                except OSError:
                    pass
        def write(out):
            while out:
                out = out[os.write(2, out):]

        head, tail, cut = 0, bytearray(), 0
        while True:
            try:
                b = os.read(0, 1 << 16)
            except InterruptedError:
                continue
            if not b:
                break
            if head < keep:
                k = keep - head
                write(b[:k])
                head += len(b[:k])
                b = b[k:]
            tail += b
            if len(tail) > keep:
                cut += len(tail) - keep
                del tail[:len(tail) - keep]
        if cut:
            write(b"\n...[%d bytes of standard error cut]...\n" % cut)
        write(bytes(tail))
    finally:
        os._exit(0)


# Lets the drainer finish before the process ends (else the sandbox may kill it with
# the process, before it wrote what it holds): closes this process's ends of the pipe
# (the descriptors fds) and waits for the drainer, which ends when every process
# holding the pipe has closed it; at most half a second, since a child the solution
# left running may hold the pipe for longer.
def _end_stderr(pid, fds):
    import os, sys, time

    if pid is None:
        return
    try:
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in fds:
        os.dup2(null, fd)
    os.close(null)
    pause, left = 0.0005, 0.5
    while left > 0:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] != 0:
                return
        except OSError:
            return
        time.sleep(pause)
        left -= pause
        pause = min(pause * 2, 0.05)
