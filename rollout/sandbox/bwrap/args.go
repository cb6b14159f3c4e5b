package bwrap

import (
	"strconv"
	"time"
)

// sandboxBin is a directory on the sandbox's read-only root holding "python" and
// "python3" links to the configured interpreter; it comes first on PATH.
const sandboxBin = "/run/sandbox/bin"

// sandboxUID is the uid (and gid) the code sees inside the sandbox. It does not
// change the host uid, which comes from the process credential.
const sandboxUID = "1000"

// bwrapArgs is the bubblewrap flag list of the design reference (§4.3), in its order,
// up to but excluding the command: ws is the host workspace, cwd the working
// directory inside, env the environment.
func bwrapArgs(f *Factory, ws, cwd string, env []string) []string {
	l := f.cfg.Limits
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--uid", sandboxUID, "--gid", sandboxUID, "--hostname", "sandbox",
		"--ro-bind", "/usr", "/usr",
	}
	for _, e := range f.rootLinks {
		if e.link != "" {
			a = append(a, "--symlink", e.link, e.name)
		} else {
			a = append(a, "--ro-bind", e.name, e.name)
		}
	}
	for _, p := range []string{"/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime", "/etc/ssl/certs"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev")
	if l.TmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(l.TmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	if l.ShmSize > 0 {
		a = append(a, "--size", strconv.FormatInt(l.ShmSize, 10))
	}
	a = append(a, "--tmpfs", "/dev/shm", "--symlink", "../tmp", "/var/tmp")
	for _, p := range f.pythonBinds {
		a = append(a, "--ro-bind", p, p)
	}
	a = append(a,
		"--symlink", f.cfg.Python, sandboxBin+"/python",
		"--symlink", f.cfg.Python, sandboxBin+"/python3",
		"--dir", WorkspaceDir, "--bind", ws, WorkspaceDir, "--chdir", cwd,
		"--remount-ro", "/dev", "--remount-ro", "/",
		"--clearenv",
	)
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				a = append(a, "--setenv", kv[:i], kv[i+1:])
				break
			}
		}
	}
	return a
}

// prlimitArgs is "prlimit <limits> --" for a command with the given timeout.
func (f *Factory) prlimitArgs(timeout time.Duration) []string {
	l := f.cfg.Limits
	a := []string{prlimitPath}
	if l.AddressSpace > 0 {
		a = append(a, "--as="+strconv.FormatInt(l.AddressSpace, 10))
	}
	// With a cgroup, its pids.max holds Limits.Processes (zombies included), and
	// RLIMIT_NPROC stays the host's: it also counts bubblewrap's own processes,
	// outside the command's cgroup, so at the same number it refused forks first and
	// the pids limit's refusals went unseen (Result.ProcessLimitHit unset).
	if l.Processes > 0 && f.cg == nil {
		a = append(a, "--nproc="+strconv.Itoa(l.Processes))
	}
	if l.FileSize > 0 {
		a = append(a, "--fsize="+strconv.FormatInt(l.FileSize, 10))
	}
	if l.OpenFiles > 0 {
		a = append(a, "--nofile="+strconv.Itoa(l.OpenFiles))
	}
	cpu := l.CPUTime
	if cpu == 0 {
		cpu = timeout + time.Second
	}
	if cpu > 0 {
		a = append(a, "--cpu="+strconv.FormatInt(int64((cpu+time.Second-1)/time.Second), 10))
	}
	return append(a, "--core=0", "--")
}
