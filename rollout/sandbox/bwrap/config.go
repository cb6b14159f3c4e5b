package bwrap

import (
	"log/slog"
	"os"
	"time"
)

// Defaults used when a [Config] field is left at its zero value.
const (
	DefaultBwrapPath       = "/usr/bin/bwrap"   // Config.BwrapPath
	DefaultPython          = "/usr/bin/python3" // Config.Python
	DefaultTimeout         = 30 * time.Second   // Config.Timeout
	DefaultMaxTimeout      = 10 * time.Minute   // Config.MaxTimeout
	DefaultOutputLimit     = 64 << 10           // Config.OutputLimit, bytes per stream
	DefaultKillOutputLimit = 16 << 20           // Config.KillOutputLimit, bytes
	DefaultDiskQuota       = 1 << 30            // Config.DiskQuota, bytes
	DefaultUID             = 65534              // Config.UID (nobody)
	DefaultGID             = 65534              // Config.GID (nobody's group)

	DefaultMemory       = 1 << 30   // Limits.Memory, bytes
	DefaultAddressSpace = 1 << 30   // Limits.AddressSpace, bytes
	DefaultProcesses    = 128       // Limits.Processes
	DefaultFileSize     = 64 << 20  // Limits.FileSize, bytes
	DefaultOpenFiles    = 256       // Limits.OpenFiles
	DefaultTmpSize      = 256 << 20 // Limits.TmpSize, bytes
	DefaultShmSize      = 64 << 20  // Limits.ShmSize, bytes
)

// MinMemory is the smallest Limits.Memory [New] accepts: below it not even the probe
// runs, and a probe failing inside the cgroup would be taken for a cgroup that does not
// work.
const MinMemory = 16 << 20

// DiskCheckInterval is how often a running command's workspace is checked against
// Config.DiskQuota. A tmpfs workspace is bounded by the kernel, and the check is a
// statfs. A walked workspace ([StorageWalk]) is checked at most this often and at
// least 20 times as long apart as the last walk took (so the walk stays under 5% of
// a core), and a fast writer can overshoot the quota by what it writes in between.
const DiskCheckInterval = 200 * time.Millisecond

// MaxWorkspaceEntries bounds the files and directories a workspace may hold, and so
// the cost of measuring it.
const MaxWorkspaceEntries = 100000

// WorkspaceDir is where the workspace appears inside a bubblewrap sandbox, and the
// working directory of every command (unless [rollout.Command.Dir] names a
// subdirectory). Host paths never appear inside the sandbox.
const WorkspaceDir = "/workspace"

// prlimitPath is util-linux's prlimit, present on every Debian system (util-linux is
// Essential). It applies the rlimits inside the sandbox.
const prlimitPath = "/usr/bin/prlimit"

// Config configures a [Factory]. The zero value of every field is a documented default,
// so Config{} is a bubblewrap sandbox with the limits of the package documentation.
type Config struct {
	// BwrapPath is the bubblewrap binary. Default [DefaultBwrapPath]; the library does
	// not search PATH.
	BwrapPath string
	// Python is the interpreter, an absolute path. Default [DefaultPython]. Inside the
	// sandbox it is also reachable as "python" and "python3" through PATH. An
	// interpreter outside /usr has its installation prefix bound read-only; it must
	// be readable by the sandbox uid (not under a 0700 home directory).
	Python string
	// BaseDir is the host directory in which workspaces are created. Default
	// os.TempDir(). It must be traversable by the sandbox uid.
	BaseDir string

	// Timeout is the wall-clock limit of a command whose [rollout.Command.Timeout] is
	// zero. Default [DefaultTimeout].
	Timeout time.Duration
	// MaxTimeout caps any command's timeout, including one asked for by the agent.
	// Default [DefaultMaxTimeout].
	MaxTimeout time.Duration
	// OutputLimit is how many bytes of each of stdout and stderr are kept: a longer
	// stream keeps its first OutputLimit-OutputLimit/2 and its last OutputLimit/2
	// bytes, joined by a line "...[N bytes cut]...", and the result is marked
	// truncated; what lies between is counted and discarded. The tail matters: test
	// runners print their verdict last. Default [DefaultOutputLimit].
	OutputLimit int
	// KillOutputLimit is the total output (stdout plus stderr) after which the
	// command is killed and the result marked [rollout.CommandResult.OutputKilled].
	// Default [DefaultKillOutputLimit].
	KillOutputLimit int64
	// DiskQuota caps the workspace's total size in bytes, deleted-but-open files
	// included, and its entries at [MaxWorkspaceEntries]. When the library runs as
	// root the workspace is a tmpfs of that size ([StorageTmpfs]): the kernel refuses
	// writes past it. Otherwise ([StorageWalk]) the workspace is measured while a
	// command runs and when it ends. Either way a command found at or over it is
	// killed and its result marked (see [Result.DiskQuotaExceeded]). Default
	// [DefaultDiskQuota]; negative means no quota (and a plain directory).
	DiskQuota int64
	// DisableWorkspaceMount keeps workspaces on the disk of BaseDir even as root
	// ([StorageWalk]), for hosts where a tmpfs workspace's RAM is not wanted. Under
	// bubblewrap such a workspace is an overlay whose files are in a directory under
	// BaseDir, so that its host path does not show inside (see the package
	// documentation, Storage).
	DisableWorkspaceMount bool

	// CgroupParent is the cgroup, as a path from the root of each hierarchy (as in
	// /proc/self/cgroup), under which each sandbox's cgroup is created. Default: the
	// library process's own cgroup. On cgroup v2 it must have no processes of its
	// own (a delegated subtree, e.g. systemd's Delegate=yes); on v1 it exists under
	// both the memory and the pids controllers.
	CgroupParent string
	// DisableCgroup turns the per-sandbox cgroup off: the limits are then the
	// per-process rlimits only, as where no cgroup can be created.
	DisableCgroup bool

	// Limits are the rlimits applied inside the sandbox.
	Limits Limits

	// UID and GID are the host ids the sandbox runs as when the process runs as root.
	// Zero means [DefaultUID] / [DefaultGID] (nobody); sandboxed code never runs as
	// host root. When the process is not root, its own ids are used and these are
	// ignored.
	UID, GID int

	// Unconfined, an explicit opt-in, runs commands without any isolation: same
	// API, own workspace, timeouts, rlimits, process-group kill, output caps, and the
	// uid drop when root, but the network, the host file system and the host's
	// processes are open to the code. Every result is marked
	// [rollout.CommandResult.Unconfined]. It is chosen only when set; it is never a
	// silent fallback.
	Unconfined bool

	// Images gives the root file systems of image references, for
	// [Factory.NewSandboxFor] with a spec that names an image (package images' Cache
	// is one). Nil: such specs are refused with [ErrNoImages].
	Images RootSource
	// CopyImageWorkspace makes each image sandbox's workspace a copy of the image's
	// working directory instead of an overlay of it (see the package documentation,
	// Image sandboxes). [New] chooses the copy by itself where the host refuses the
	// idmapped mount the overlay needs.
	CopyImageWorkspace bool
	// DisableGoBuildCache keeps image sandboxes of Go repositories as the image
	// has them: no GOCACHE of the library's, no warm cache shared between the
	// sandboxes of an image (see the package documentation, Go repositories).
	DisableGoBuildCache bool

	// Logger receives the probe outcome and kills at Debug/Info level. Nil means no
	// logging.
	Logger *slog.Logger
}

// Limits are the sandbox's resource limits. Memory and Processes hold for the whole
// sandbox (every process of every command together) through its cgroup; the others
// are rlimits set with prlimit inside the sandbox, per process. Zero means the
// default; a negative value means no limit from the sandbox (the library process's
// own rlimit is inherited).
type Limits struct {
	// Memory caps the memory of the whole sandbox in bytes, swap excluded (swap is
	// off for it): its processes, what they hold in memfd and in its /tmp and
	// /dev/shm, and, with a tmpfs workspace, the workspace files its commands write.
	// Past it the kernel's OOM killer kills a process of the sandbox and the result
	// is marked [Result.MemoryLimitHit]. It needs a cgroup ([Factory.Enforcement]);
	// without one, only AddressSpace bounds memory, per process. Default
	// [DefaultMemory] (1 GiB).
	Memory int64
	// AddressSpace is RLIMIT_AS in bytes. Default [DefaultAddressSpace] (1 GiB).
	// Runtimes that reserve large virtual ranges (JVM, Go) may need more.
	AddressSpace int64
	// Processes caps the processes and threads of the whole sandbox, zombies
	// included: the pids.max of its cgroup. Default [DefaultProcesses]. Without a
	// cgroup, RLIMIT_NPROC holds it instead: under bubblewrap it counts per sandbox,
	// in unconfined mode every process of the uid. With one, RLIMIT_NPROC is left as
	// the host has it, so that every refused fork is the cgroup's, and reported.
	Processes int
	// FileSize is RLIMIT_FSIZE in bytes, the size of any single file written.
	// Default [DefaultFileSize] (64 MiB).
	FileSize int64
	// OpenFiles is RLIMIT_NOFILE. Default [DefaultOpenFiles].
	OpenFiles int
	// CPUTime is RLIMIT_CPU, rounded up to whole seconds. Default: the command's
	// timeout plus one second, a backstop behind the wall-clock timeout.
	CPUTime time.Duration
	// TmpSize caps the sandbox's private /tmp (bubblewrap only). Default
	// [DefaultTmpSize] (256 MiB).
	TmpSize int64
	// ShmSize caps the sandbox's private /dev/shm (bubblewrap only). Default
	// [DefaultShmSize] (64 MiB).
	ShmSize int64
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.BwrapPath == "" {
		c.BwrapPath = DefaultBwrapPath
	}
	if c.Python == "" {
		c.Python = DefaultPython
	}
	if c.BaseDir == "" {
		c.BaseDir = os.TempDir()
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.OutputLimit == 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.KillOutputLimit == 0 {
		c.KillOutputLimit = DefaultKillOutputLimit
	}
	if c.DiskQuota == 0 {
		c.DiskQuota = DefaultDiskQuota
	}
	if c.UID == 0 {
		c.UID = DefaultUID
	}
	if c.GID == 0 {
		c.GID = DefaultGID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	l := &c.Limits
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = DefaultAddressSpace
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.FileSize == 0 {
		l.FileSize = DefaultFileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.TmpSize == 0 {
		l.TmpSize = DefaultTmpSize
	}
	if l.ShmSize == 0 {
		l.ShmSize = DefaultShmSize
	}
	return c
}

// validate reports configuration a caller must fix.
func (c Config) validate() error {
	switch {
	case c.Timeout < 0:
		return configError("Timeout must not be negative")
	case c.MaxTimeout < 0:
		return configError("MaxTimeout must not be negative")
	case c.Timeout > c.MaxTimeout:
		return configError("Timeout must not exceed MaxTimeout")
	case c.OutputLimit < 0:
		return configError("OutputLimit must not be negative")
	case c.KillOutputLimit < 0:
		return configError("KillOutputLimit must not be negative")
	case int64(c.OutputLimit) > c.KillOutputLimit:
		return configError("OutputLimit must not exceed KillOutputLimit")
	case c.UID < 0 || c.GID < 0:
		return configError("UID and GID must not be negative")
	case c.Limits.TmpSize < 0 || c.Limits.ShmSize < 0:
		return configError("Limits.TmpSize and Limits.ShmSize must not be negative")
	case c.Limits.Memory > 0 && c.Limits.Memory < MinMemory:
		return configError("Limits.Memory must be at least 16 MiB (the interpreter alone needs about 10), or negative for none")
	case c.CgroupParent != "" && !isAbs(c.CgroupParent):
		return configError("CgroupParent must be an absolute cgroup path such as /agenticopd, got " + c.CgroupParent)
	case !isAbs(c.Python):
		return configError("Python must be an absolute path, got " + c.Python)
	case !isAbs(c.BwrapPath) && !c.Unconfined:
		return configError("BwrapPath must be an absolute path, got " + c.BwrapPath)
	}
	return nil
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }
