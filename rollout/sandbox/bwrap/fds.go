package bwrap

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor of this process that lacks
// close-on-exec as close-on-exec. Go opens its own descriptors with it, but a
// process can inherit others from its parent (or get them from C code), and neither
// exec nor bubblewrap closes those: they would leak into the sandbox. Go's os/exec
// still passes Stdin/Stdout/Stderr and ExtraFiles to children as before.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
	}
}
