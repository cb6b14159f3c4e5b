package bwrap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Where the library can make bwrap's namespaces (Factory.ownNS, the default), bwrap is
// the only process it starts for a command, and nothing runs between it and the
// command:
//
//   - the library starts bwrap in a user namespace that maps the command's uid and
//     gid to themselves and a pid namespace of which bwrap is the init (clone with
//     CLONE_NEWUSER and CLONE_NEWPID), so that bwrap reaps everything in its sandbox
//     before it is gone and the library reaps bwrap (see namespaces);
//   - bwrap reads its options (--args) from a pipe, and reads them before it forks
//     anything (bubblewrap parses its options before it makes the sandbox). The
//     library writes them only once it has put bwrap's process in the command's
//     cgroup (on v1; on v2 clone3 made it there) and set its rlimits with
//     prlimit(2): every process of the command inherits both, from its first
//     instruction. The options on a pipe are no more visible than on a memfd: in
//     no command line, inside the sandbox or out.
//
// This replaces, per command, three programs started before the command: a /bin/sh
// wrapper that joined the cgroup v1, unshare(1) that made the namespaces, and
// prlimit(1) inside the sandbox that set the rlimits. RLIMIT_NPROC is the exception:
// set only where no cgroup holds Limits.Processes, it counts the processes of a uid
// in a user namespace, so it is still set by prlimit(1) inside the sandbox, where it
// counts the command's own processes; an image sandbox, which need not have prlimit,
// has it set on bwrap with the others, as before.

// gate holds a started bwrap at its options.
type gate struct {
	// opts are bwrap's options, NUL-separated, as --args reads them.
	opts []byte
	// limits are set on bwrap's process before the options are written.
	limits []rlimit
	// w is the library's end of the pipe bwrap reads its options from.
	w *os.File
}

// gatedCommand is [Sandbox.bwrapCommand]'s command where the library makes bwrap's
// namespaces: bwrap alone (plus prlimit(1) for RLIMIT_NPROC where it is set inside),
// reading opts through a gate, and writing its status on statusW.
func (s *Sandbox) gatedCommand(opts []string, timeout time.Duration, argv []string, status, statusW *os.File) (runSpec, error) {
	f := s.f
	optR, optW, err := os.Pipe()
	if err != nil {
		closeAll(status, statusW)
		return runSpec{}, err
	}
	nproc := f.cg == nil
	args := []string{"--args", "4", "--"}
	if nproc && s.img == nil && f.cfg.Limits.Processes > 0 {
		args = append(args, prlimitArgs([]rlimit{{unix.RLIMIT_NPROC, "--nproc", uint64(f.cfg.Limits.Processes)}})...)
		nproc = false
	}
	var b bytes.Buffer
	for _, a := range opts {
		b.WriteString(a)
		b.WriteByte(0)
	}
	cmd := exec.Command(f.cfg.BwrapPath, append(args, argv...)...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{statusW, optR}
	g := &gate{opts: b.Bytes(), limits: f.rlimits(timeout, nproc), w: optW}
	return runSpec{cmd: cmd, status: status, gate: g}, nil
}

// open puts the started bwrap, pid (not reaped yet, so the pid cannot name another
// process), in cc (nil: no cgroup), sets its rlimits, and writes its options, which
// lets it go on. The gate is closed either way.
func (g *gate) open(pid int, cc *commandCgroup) error {
	defer g.close()
	if cc != nil {
		if err := cc.join(pid); err != nil {
			return err
		}
	}
	for _, l := range g.limits {
		lim := unix.Rlimit{Cur: l.value, Max: l.value}
		if err := unix.Prlimit(pid, l.resource, &lim, nil); err != nil {
			return fmt.Errorf("setting %s on bubblewrap: %w", l.option[2:], err)
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

// namespaces makes the command's first process the init of a user and a pid
// namespace of its own. The user namespace maps the command's uid and gid to
// themselves, as unshare --map-current-user did: bubblewrap, unprivileged there,
// makes the sandbox's own namespaces inside it. As root, the credential's empty group
// list is set in it (setgroups is allowed there, which only root may ask for), so root's
// supplementary groups are dropped; without root, setgroups is denied, as the
// kernel requires for the gid mapping of an unprivileged process.
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
	uid, gid := f.uid(), f.gid()
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = f.asRoot
}
