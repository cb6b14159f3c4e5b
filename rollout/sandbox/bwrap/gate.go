package bwrap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Where the library makes bwrap's namespace (Factory.ownNS: as root, unless the probe
// found it cannot), it starts bwrap with no wrapper before it:
//
//   - the library starts bwrap in a pid namespace of which bwrap is the init (clone
//     with CLONE_NEWPID), so that bwrap reaps everything in its sandbox before it is
//     gone and the library reaps bwrap (see namespaces);
//   - bwrap reads its options (--args) from a pipe, and reads them before it forks
//     anything (bubblewrap parses its options before it makes the sandbox). On cgroup
//     v1 the library writes them only once it has put bwrap's process in the
//     command's cgroup (on v2 clone3 made it there): every process of the command is
//     in it from its first instruction. The options on a pipe are no more visible
//     than on a memfd: in no command line, inside the sandbox or out.
//
// This replaces two programs started per command before bwrap: a /bin/sh wrapper that
// joined the cgroup v1, and unshare(1) that made the namespaces. The rlimits are still
// set by prlimit(1), inside the sandbox before the command (or, for an image, which
// need not have prlimit, on the host before bwrap): the library could set them on
// bwrap with prlimit(2) only with CAP_SYS_RESOURCE, since bwrap runs as the sandbox
// uid, and root lacks that capability in some containers and virtual machines.
// Without root, bwrap starts under unshare(1) as before (see reaped in run.go).

// gate holds a started bwrap at its options.
type gate struct {
	// opts are bwrap's options, NUL-separated, as --args reads them.
	opts []byte
	// w is the library's end of the pipe bwrap reads its options from.
	w *os.File
}

// gatedCommand is [Sandbox.bwrapCommand]'s command where the library makes bwrap's
// namespace: bwrap (after the host's prlimit for an image) reading opts through a
// gate, and writing its status on statusW.
func (s *Sandbox) gatedCommand(opts []string, timeout time.Duration, argv []string, status, statusW *os.File) (runSpec, error) {
	f := s.f
	optR, optW, err := os.Pipe()
	if err != nil {
		closeAll(status, statusW)
		return runSpec{}, err
	}
	limits := f.prlimitArgs(timeout)
	args := append(append([]string{f.cfg.BwrapPath, "--args", "4", "--"}, limits...), argv...)
	if s.img != nil {
		// An image need not have prlimit: the host's sets the limits and execs bwrap,
		// the same process, which the command inherits them from.
		args = append(append(limits, f.cfg.BwrapPath, "--args", "4", "--"), argv...)
	}
	var b bytes.Buffer
	for _, a := range opts {
		b.WriteString(a)
		b.WriteByte(0)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{statusW, optR}
	return runSpec{cmd: cmd, status: status, gate: &gate{opts: b.Bytes(), w: optW}}, nil
}

// open puts the started bwrap (or the prlimit that execs it), pid (not reaped yet, so
// the pid cannot name another process), in cc (nil: no cgroup), and writes its
// options, which lets it go on. The gate is closed either way.
func (g *gate) open(pid int, cc *commandCgroup) error {
	defer g.close()
	if cc != nil {
		if err := cc.join(pid); err != nil {
			return err
		}
	}
	if _, err := g.w.Write(g.opts); err != nil {
		return fmt.Errorf("writing bubblewrap's options: %w", err)
	}
	return nil
}

// close closes the library's end of the options pipe (bwrap reads them to its end);
// g may be nil.
func (g *gate) close() {
	if g != nil {
		_ = g.w.Close()
	}
}

// namespaces makes the command's first process, bwrap, the init of a pid namespace of
// its own, which the library may make as root (CAP_SYS_ADMIN) without a user
// namespace: Go then starts it sharing the library's memory until it execs (vfork),
// as for any command, where a user namespace would make it copy the whole process.
//
// bubblewrap's first process returns the command's exit status as soon as the
// sandbox's init reports it, without waiting for that init to be gone: the init is
// then an orphan, which the host's pid 1 must reap, and until it does, it counts
// against the sandbox's process limit (a pid 1 that reaps late, or never, as a
// container's own program run as pid 1 does, left a sandbox unable to start a
// command after as many commands as its limit). As the init of its own namespace,
// bubblewrap's first process instead reaps everything in it before it is gone, and
// the library reaps it.
func (f *Factory) namespaces(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWPID
}
