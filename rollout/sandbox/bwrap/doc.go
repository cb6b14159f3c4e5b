// Package bwrap runs an agent's commands confined with bubblewrap, one workspace per
// rollout. [Factory] implements [rollout.SandboxFactory] and [Sandbox] implements
// [rollout.Sandbox].
//
//	f, err := bwrap.New(ctx, bwrap.Config{}) // probes bwrap once
//	sb, err := f.NewSandbox(ctx)                 // a fresh workspace
//	defer sb.Close()                             // kills leftovers, removes the workspace
//	res, err := sb.Run(ctx, rollout.Command{Shell: "python test_solution.py"})
//
// # Design
//
// Every command is a fresh bwrap(1) invocation (bubblewrap 0.8.0 or later):
//
//   - every namespace unshared (--unshare-all --unshare-user: user, pid, net, ipc, uts,
//     cgroup, mount); the network namespace has only a loopback interface, so nothing
//     leaves the sandbox while servers the code starts on 127.0.0.1 work inside it;
//   - --disable-userns (no nested user namespaces), --cap-drop ALL, --die-with-parent,
//     --new-session, --hostname sandbox, uid and gid 1000 inside;
//   - a read-only minimal root: /usr bound read-only, the merged-/usr links (/bin,
//     /lib…), a few /etc pieces (alternatives, ld.so.cache, localtime, ssl/certs; never
//     /etc/passwd, /etc/shadow or /etc/ssl/private), a fresh /proc with /proc/sys
//     read-only, a minimal read-only /dev, a private size-capped /tmp (256 MiB) and
//     /dev/shm (64 MiB), then the root itself remounted read-only;
//   - the workspace bound read-write at [WorkspaceDir] ("/workspace"), the only host
//     path the code can write, and the working directory; host paths never appear,
//     /proc/self/mountinfo included (see Storage for how a workspace that is not a
//     tmpfs keeps its path out of it, and [Enforcement.HostPathVisible] for a host
//     where it cannot). The host uid the code
//     runs as does show, in the options of the tmpfs mounts bubblewrap makes (the
//     kernel prints a tmpfs's owner as the host sees it);
//   - a cleared environment: PATH (with "python" and "python3" linked to
//     Config.Python first), HOME=/workspace, LANG=C.UTF-8, TMPDIR=/tmp,
//     PYTHONDONTWRITEBYTECODE, PYTHONUNBUFFERED, one-thread BLAS/OpenMP;
//   - no descriptor but stdin, stdout and stderr: before each command the library
//     marks every descriptor its process inherited without close-on-exec as
//     close-on-exec (neither exec nor bubblewrap would close them), a process-wide
//     side effect; pass descriptors to other children through exec.Cmd.ExtraFiles;
//   - rlimits set inside by prlimit(1): address space 1 GiB, 128 processes, 64 MiB
//     per file, 256 open files, CPU time = timeout + 1 s, no core dumps (see [Limits]);
//   - bwrap's options, which name host paths, reach it through a pipe (as root) or a
//     sealed memfd (--args), so neither the sandbox's /proc/*/cmdline nor the host's
//     process list shows them;
//   - bwrap starts as the init of a pid namespace of its own: as root the library
//     makes it when it starts bwrap (CLONE_NEWPID); without root, unshare(1) makes it
//     in a user namespace that maps the command's uid to itself (the library does
//     not: Go starts a process in a new user namespace by copying the whole calling
//     process, milliseconds per command in one with a large heap); in an overlay
//     holder's namespaces, see Storage, bwrap runs under the holder's shell instead.
//     bubblewrap's first process returns the command's exit status without waiting
//     for the sandbox's init to be gone; an init orphaned to the host's pid 1 counted
//     against Limits.Processes until that reaped it, late on some hosts and never
//     under a program run as a container's pid 1, so that a sandbox could start no
//     command after about that many. As an init, bwrap reaps everything in its
//     namespace before it is gone, and the library (or unshare) reaps bwrap: when Run
//     returns, nothing of the command is left to reap. Where that namespace cannot be
//     made (bwrap installed setuid, a policy on unprivileged user namespaces) but
//     bwrap works, [New] starts bwrap directly instead and logs a warning;
//   - as root, bwrap is held at its options: it reads them before it forks anything,
//     and the library writes them only once bwrap's process is in the command's
//     cgroup (see below). So no program runs before bwrap for a command but, for an
//     image, the host's prlimit(1) (without root, unshare(1), and on cgroup v1 a
//     /bin/sh wrapper that joins the cgroup).
//
// # Limits for the whole sandbox: the cgroup
//
// Rlimits hold per process: eight processes under a 1 GiB RLIMIT_AS take 8 GiB, and
// what a process writes into a memfd (or a tmpfs) without mapping it is not address
// space at all. So each Sandbox gets a cgroup
// holding Limits.Memory (1 GiB, swap off) and Limits.Processes (128) for all its
// processes together, whichever command started them; every page they are charged
// for counts, memfd and tmpfs (/tmp, /dev/shm, a tmpfs workspace) included. Each
// command runs in a child cgroup of it, which the command's first process enters
// before it runs anything: on cgroup v2 the child is created in it (clone3 with
// CLONE_INTO_CGROUP); on v1, which has no such call, the library writes bwrap's
// pid into the child's cgroup.procs while bwrap waits for its options as root
// (otherwise a one-line /bin/sh wrapper running as the sandbox uid writes its own pid
// into the child's cgroup.procs, given to that uid, and executes bwrap). When the
// command ends whatever is left in its cgroup is killed (cgroup.kill on v2, pidfds
// checked for membership on v1).
// Over the memory limit the kernel's OOM killer kills a process of the sandbox and
// the result is marked [Result.MemoryLimitHit]; forks the pids limit refused mark
// [Result.ProcessLimitHit]; each adds a note to Stderr.
//
// Both layouts are detected at [New] from /proc/self/cgroup and /sys/fs/cgroup: v2
// with the memory and pids controllers (preferred), else v1's memory and pids
// hierarchies (the hybrid layout, where the unified tree has no controllers). The
// sandbox cgroups are made under the library process's own cgroup, or under
// Config.CgroupParent: on v2 a cgroup that holds processes cannot hand controllers
// to children, so a library running in a leaf is given a delegated, empty subtree
// (systemd's Delegate=yes, for example). Where no cgroup can be made (not root, no
// delegated subtree, Config.DisableCgroup), the rlimits remain and [New] says so once,
// at warn level, naming the limits that hold per process only
// ([Enforcement.PerProcessOnly]). [Factory.Enforcement] reports what is active.
//
// # Storage
//
// When the library runs as root, each workspace is a tmpfs of Config.DiskQuota bytes
// and [MaxWorkspaceEntries] inodes ([StorageTmpfs]): the kernel refuses writes past
// it with ENOSPC, files deleted but still open included, and the check while a command
// runs is a statfs. A tmpfs is RAM: what the sandbox's commands write there is
// charged to its cgroup and counts in Limits.Memory (files the host-side file
// methods write are charged to the library's process), so with the defaults a
// sandbox holds at most 1 GiB of RAM whatever it does. A tmpfs was preferred to a
// loop-mounted file system per workspace: no mkfs, no loop device, no image file,
// and its memory is bounded by the same cgroup. Config.DisableWorkspaceMount keeps
// workspaces on the disk of Config.BaseDir.
//
// A bind mount of a directory shows, in /proc/self/mountinfo, the directory's path
// within its file system (the "root" field): for a plain directory under
// Config.BaseDir, the host path of the workspace. So as root, a workspace that is not
// a tmpfs (Config.DisableWorkspaceMount, or a negative DiskQuota) is an overlay the
// library mounts on it: its files live on disk in the upper layer ("data" in the
// sandbox's directory) over an empty lower layer, the workspace is the root of a file
// system of its own ("/" in mountinfo), and the layers are named in the mount's
// options as /proc/self/fd/N, descriptors the library held while mounting. Without
// root the library cannot mount on the host, so each such workspace is an overlay in
// a user and mount namespace of its own, held for the sandbox's life by a small
// process (unshare(1), then mount(8) with the layers named relative to the sandbox's
// directory, "lowerdir=empty,upperdir=data,...", then cat(1) on a pipe the library
// holds, so it ends with the sandbox or with the library's process); each command
// enters those namespaces with nsenter(1) before bwrap starts, and the host-side file
// methods reach the overlay through /proc/<pid>/root ([Sandbox.HostDir]). [New] tries
// an overlay in Config.BaseDir; where that fails (a BaseDir on a file system
// overlayfs cannot use as an upper layer, a kernel without unprivileged overlayfs),
// the workspace is bound as a plain directory, its path shows in mountinfo, [New]
// warns, and [Enforcement.HostPathVisible] says why. A tmpfs workspace shows "/" as
// well.
//
// Without root ([StorageWalk]) the workspace is a directory under Config.BaseDir,
// measured while a command runs and when it ends: a walk through its os.Root adds up
// file sizes, and the files the command's processes hold open although deleted are
// found through /proc/<pid>/fd (its cgroup's processes, or without one its
// descendants and every process in their pid namespace) and added. Checks are
// spaced by 40 times what the last one cost, so that measuring a large workspace
// costs at most about 5% of a core; a fast writer can overshoot by what it writes
// in between. Either way a command found with its workspace full or over quota is
// killed and marked [Result.DiskQuotaExceeded].
//
// A sandbox's directory holds a lock file its process keeps locked (flock) until
// Close. If the library process dies, its sandboxes stay (a tmpfs stays mounted,
// cgroups stay made); the next [New] on the same base directory removes every
// sandbox no live process holds.
//
// When the library runs as root, bwrap is started as host uid/gid 65534
// (Config.UID/GID) with no supplementary groups. Were it started as root, the code
// inside would be host uid 0 even without capabilities: it could write global
// sysctls, read root-only files that are bound in, and ignore RLIMIT_NPROC. As a
// non-root host uid, RLIMIT_NPROC counts per sandbox (it is set inside the user
// namespace); it is set only where no cgroup holds Limits.Processes. Workspaces,
// and every file the host-side file methods write, are owned by that uid.
//
// # Image sandboxes
//
// [Factory.NewSandboxFor] implements [rollout.SpecFactory]: for a
// [rollout.SandboxSpec] naming an image it asks Config.Images (a [RootSource], such
// as package images' Cache) for the image's unpacked root and runs every command of
// the sandbox over it, with the same bubblewrap flags, cgroup, rlimits, timeouts,
// output caps and kills as above. It needs bubblewrap and either root or a kernel
// that lets an ordinary user mount overlayfs in a user namespace (see Without root
// below; [ErrNoImages] without Config.Images). What changes:
//
//   - the root is the image's, read-only: an overlay the library mounts in the
//     sandbox's directory, the image's root below (never written), a small upper
//     layer above that holds what bubblewrap and the code need and the image may
//     lack (the /proc, /dev, /tmp and working-directory mount points, an
//     /etc/hosts with localhost, /etc/hostname, and with spec.Network the host's
//     /etc/resolv.conf); bubblewrap binds it read-only at /, then /proc, /dev, the
//     size-capped /tmp and /dev/shm as before (the image's /var/tmp stays as the
//     image has it, read-only); no host directory is bound at all;
//   - the workspace is the working directory (spec.WorkDir, else the image's
//     WorkingDir, else [WorkspaceDir]; /, /proc, /dev, /sys, /tmp and /etc are
//     refused): an overlay whose lower layer is the image's directory there and
//     whose upper layer takes every change, so a sandbox starts from the image's
//     files in about the time of a few mounts whatever their number; commands
//     start there, the file tools' paths are relative to it, and [Sandbox.Dir]
//     names it. A working directory the image lacks starts empty;
//   - ownership: the code runs as the image's User inside ("" and "root" are uid 0,
//     as docker; a name is looked up in the image's /etc/passwd and /etc/group), on
//     the host always as Config.UID. An unpacked root keeps no owners of the image's
//     own: its files belong to the host uid that unpacked them (package images'
//     Cache gives them to the sandbox uid). Where that is another uid (root, say),
//     both lower layers are idmapped mounts that make its files the sandbox uid's:
//     the code reads the root as the image's user would (root's 0700 /root, where
//     SWE images keep a .bashrc or a .venv; still read-only) and owns its
//     workspace. Files of other owners show as the overflow id, with their modes;
//   - the upper layers (the root's and the workspace's) live on one tmpfs of
//     Config.DiskQuota bytes, so the storage bound is the kernel's as for a tmpfs
//     workspace (with Config.DisableWorkspaceMount they are on the disk of
//     Config.BaseDir and the workspace is walked, the image's own files counting
//     towards the quota);
//   - the environment is the image's Env (a later duplicate wins), then what docker
//     exec adds where the image has none: PATH, HOME (the user's passwd entry, else
//     /root for root, else /), HOSTNAME=sandbox, and one thread for BLAS and OpenMP.
//     An image with a conda installation (an etc/profile.d/conda.sh under /opt,
//     /root or /usr/local) gets the environment its login shell activates, as
//     "docker exec bash -lc" would (SWE-bench's images activate their testbed
//     environment in /root/.bashrc): `bash -lc 'env -0'` runs once per image root,
//     user and environment in the first sandbox, its output (less PWD, OLDPWD, SHLVL
//     and _) is cached in the Factory and becomes every command's environment,
//     shell or not, at no cost per command. A profile that does more than set
//     variables is not replayed; such commands can still run under bash -lc;
//   - the rlimits are set by the host's prlimit on bubblewrap, which the command
//     inherits, since an image need not have prlimit;
//   - spec.Network keeps the host's network namespace (--share-net); without it the
//     sandbox has only its own loopback, as every other sandbox.
//
// Copy fallback: where the host refuses idmapped mounts (an image cache on a file
// system without them, overlayfs among them; [New] cannot know, the first image
// sandbox finds out and says so once at warn level), or with
// Config.CopyImageWorkspace, the image's working directory is copied into the
// workspace's upper layer (over an empty lower layer), owned by the sandbox uid, and
// the root is the image's with its files owned as on the host (a 0700 directory of
// root's is then closed to the code). BenchmarkImageWorkspace10k measures both.
//
// Without root: the same file systems, in a namespace of the sandbox's own. An
// ordinary user cannot mount on the host, so each image sandbox gets a user and
// mount namespace of its own, where the library's uid is root, held for the
// sandbox's life by a small process (the holder: unshare(1), then a /bin/sh script
// of mount(8) commands, then cat(1) on a pipe the library holds, so that it ends
// with the sandbox or with the library's process, as for the walked workspaces of
// Storage). The script mounts the layers' tmpfs; the library writes the upper
// layers through /proc/<holder>/root (the root's mount points and /etc/hosts, a
// copied working directory); the script then mounts the two overlays (and the Go
// build cache's), with userxattr. The image's root and working directory are
// opened by the script as descriptors, by paths the library resolved inside the
// image through an [os.Root], and named /proc/self/fd/N in the mount options, as
// when the library mounts them as root (an overlay takes lower layers only from its
// own mount namespace, so the library's descriptors cannot be passed); the layers
// are named relative to the sandbox's directory, so mountinfo inside shows no host
// path. The holder's namespaces include a pid namespace whose init is the script
// (then its cat), with a /proc of its own. Each command enters the holder's
// namespaces with nsenter(1), then prlimit(1) and bwrap run there with the flag list
// above, over the same paths; the host-side file methods reach the workspace through
// /proc/<holder>/root ([Sandbox.HostDir]). When the library's process dies, the pipe
// ends, cat ends, and the kernel kills every process of the pid namespace: bubblewrap
// and everything the command started, whatever became of their parent-death signals
// (which a process can lose when its credentials change).
// This was preferred to re-executing the library's own binary as a mount helper
// (that would take over the caller's program at start-up) and to bubblewrap's
// overlay options (0.10 and later; Debian 12 ships 0.8): it reuses the holder the
// walked workspaces already have, at the cost of one sh, one cat and a few mount(8)
// runs per sandbox.
//
// What holds as root holds without root: the read-only root, the workspace an
// overlay of the image's working directory (no copy), no network, the namespaces,
// capabilities and flags of every command, the rlimits, timeouts, output caps and
// kills, the storage bound (the layers' tmpfs of Config.DiskQuota bytes is mounted
// in the holder's namespace, which a user namespace allows, so the kernel refuses
// writes past it as for root), no host path in mountinfo, nothing left after Close
// (the mounts end with the holder's namespace) or after a SIGKILL of the library
// (the holder's pipe ends, and the next [New] removes the directories). What
// differs, and why:
//
//   - the host uid is the library's own, not Config.UID (there is no credential to
//     drop), as for every sandbox without root;
//   - no cgroup, unless Config.CgroupParent names one delegated to the user: memory
//     and processes are then held per process by the rlimits ([Enforcement]), and
//     the pages of the layers' tmpfs are bounded by Config.DiskQuota rather than
//     counted in Limits.Memory. RLIMIT_NPROC still counts per sandbox: prlimit sets
//     it inside the holder's user namespace, before bwrap makes its own, and the
//     kernel holds a process to the limit in every user namespace above it;
//   - no idmapped mounts (the kernel allows them only to root of the file system's
//     user namespace): the image's files are shown as the library's uid has them.
//     An image cache the same user unpacked (package images' Cache without root
//     keeps the files the user's) gives what the idmapped mounts give as root: the
//     code, as the image's user, owns every file, root's 0700 /root included. Files
//     of other owners show as the overflow id with their modes, and a working
//     directory the library's uid does not own is copied into the workspace (said
//     once at warn level);
//   - a warm Go build cache stays the library's uid's, which is also the code's:
//     it is still never written, being only ever an overlay's lower layer.
//
// [New] with Config.Images set and without root tries this once in Config.BaseDir
// (a tmpfs and an overlay mounted in a user namespace, and bubblewrap started
// inside it) and fails with a [*ProbeError] wrapping [ErrImageUnsupported] that
// says why and what to do: no user namespaces (or no nested one), a kernel before
// 5.11 (the first with overlayfs in user namespaces), an overlay the kernel refused
// over Config.BaseDir's file system, or unshare, nsenter and mount missing. So a
// program is refused at start, never at its first image. Tested on Linux 6.18 with
// bubblewrap 0.8.0 as uid 1000 (TestImageSandboxWithoutRoot, the hostile suite's
// image cases in TestHostileWithoutRoot, TestGoBuildCacheWithoutRoot,
// TestImageSandboxAfterSIGKILLWithoutRoot; the refusals in
// TestImageSandboxesRefusedAtStart and TestImageSandboxesRefusedWithoutUserNamespaces).
// Kernels 5.11 to 6.5
// were not tried: their tmpfs has no user extended attributes, which overlayfs
// keeps its own in with userxattr (Config.DisableWorkspaceMount puts the layers on
// Config.BaseDir's disk instead).
//
// Nothing is left behind: Close unmounts the overlays and the tmpfs, removes the
// sandbox's directory and cgroups, and calls the root's Release once; a removal
// never descends into a directory that is still a mount point (the image's files
// could be below). After a SIGKILL of the library process the sandbox's commands die
// with it as above, and the next [New] on the same base directory unmounts and
// removes what the dead process left, image sandboxes included.
//
// A later backend that runs the same images elsewhere implements the same
// [rollout.SpecFactory]: a Kubernetes backend's NewSandboxFor would create a pod
// from spec.Image (image pull secrets in place of the keychain, the image's own Env,
// WorkingDir and User honoured by the runtime), spec.WorkDir as the container's
// working directory on its writable layer, spec.Network as a NetworkPolicy that
// denies egress unless set, Limits as the pod's resource limits and
// ephemeral-storage bound, and its Sandbox's Run as an exec with a timeout and
// output caps; ReadFile, WriteFile and FS would go through the same exec (tar
// streams) bounded like the file tools here, and Close would delete the pod. Callers
// see no difference: rollout and grading only use the interfaces.
//
// # Go repositories
//
// A Go repository's tests compile before they run, and the go command keeps what
// it compiled in its build cache (GOCACHE). Over a read-only root a sandbox would
// have none (or an empty one each time), and every grading would compile the
// packages of the standard library the tests need again, minutes under load. An
// image sandbox whose image is a Go repository's (a go command in a directory of the
// image's PATH, and a go.mod in the working directory) gets a cache, unless
// Config.DisableGoBuildCache is set:
//
//   - GOCACHE is the image's own when its Env sets one that can be mounted (an
//     absolute path outside the working directory, not under /proc, /dev, /sys,
//     /tmp or /etc), else [GoCacheDir]; either way outside the working tree, so
//     the cache is never in the agent's diff;
//   - the cache is warmed once per image and working directory, by the library,
//     before any sandbox of the image is handed out: in a sandbox of the pristine
//     image, without the network, `go build ./...` and `go test -count=1 -run '^$'
//     -exec /bin/true ./...` compile what the repository's tests need (its packages,
//     their dependencies, the test binaries, vet's inputs) and run none of it, so no
//     test result is cached. The directory it wrote is then sealed (root's,
//     directories 0755, files 0444 with a modification time far ahead, so that the go
//     command never trims or touches an entry; anything but files and directories
//     removed) and renamed into place, in the root's [ImageRoot.CacheDir] (package
//     images' Cache keeps it beside the unpacked root and removes it with the root),
//     under an exclusive flock there, so processes sharing an image cache warm each
//     image once between them. A warm-up that fails or times out (Config.MaxTimeout)
//     keeps what it compiled (the go command writes an entry's index after its
//     output, and checks the output's size when it reads it); one that cannot run at
//     all is logged at warn level and not tried again by the factory;
//   - every sandbox of the image gets the warm cache read-only, as the lower layer of
//     an overlay mounted at GOCACHE whose upper layer is its own (on the layers'
//     tmpfs, within its storage bound; with Config.DisableWorkspaceMount on a tmpfs
//     of its own of Config.DiskQuota bytes). The go command adds entries there; the
//     warm files it cannot change in place (they are root's and read-only, and the
//     code has no capability), and whatever the code replaces or adds dies with the
//     sandbox. So nothing an agent writes into its cache (a forged test result, a
//     forged compile output under an action id grading will look up) reaches another
//     sandbox, its own grading included: a grading sees the warm cache and its own
//     work only. A root without a CacheDir gives each sandbox an empty cache of its
//     own;
//   - the module cache, GOPATH, GOFLAGS, GOPROXY and GOTOOLCHAIN stay as the image
//     has them. A SWE-style Go image holds its dependencies (a vendor directory, or
//     a module cache that go mod download filled when the image was built, under
//     the read-only root), which the go command reads without writing; without the
//     network a module the image lacks cannot be fetched, as under docker run
//     --network none. GOFLAGS=-mod=mod is not set: it would let the go command
//     rewrite go.mod and go.sum and reach for the network;
//   - a test command with build flags of its own (-race, -tags, -gcflags) compiles
//     what those flags change anew in each sandbox;
//   - the go command, the compilers and the test binaries reserve more address
//     space than the default Limits.AddressSpace (1 GiB) allows: where a thread's
//     stack cannot be mapped the command aborts (runtime/cgo: pthread_create
//     failed), about one grading in ten of the Go toy task. A factory that runs Go
//     images needs an AddressSpace of a few GiB (the tests give 4 GiB) or none;
//     Limits.Memory, the cgroup's, still bounds what they use.
//
// # Process control
//
// bwrap runs in its own process group with Pdeathsig SIGKILL. On timeout, on the
// context ending, past the hard output cap or on Close, the group is killed with
// SIGKILL; --die-with-parent then kills the pid namespace's init, and the kernel kills
// everything else in the namespace, including children that called setsid or
// daemonised. When a command exits normally its pid namespace dies with it, so
// background processes never outlive the command. A group is only ever signalled
// while its leader is unreaped (waitid WNOWAIT), so a recycled pid is never hit.
//
// Output: Config.OutputLimit bytes (64 KiB) of each of stdout and stderr are kept, the
// head and the tail of a longer stream (half each, joined by a line
// "...[N bytes cut]..."), so that a verdict printed last is not lost; the rest is read,
// counted ([Result]) and discarded, so the command never blocks on a full pipe, and the
// result is marked OutputTruncated. When stdout and stderr together pass
// Config.KillOutputLimit (16 MiB) the command is killed and marked OutputKilled. A
// timeout gives ExitCode 124 and TimedOut; death by signal N gives 128+N. bwrap
// failing to set up a command (it never ran) is an [ErrStart] error, except when the
// OOM killer took it: a sandbox whose memory is full before a command begins (a
// tmpfs workspace file is memory, and it outlives the command that wrote it) gives
// a result with MemoryLimitHit, the sandboxed code's doing, not the host's.
//
// # Started commands
//
// [Sandbox.Start] implements [rollout.Starter]: it starts a command with its standard
// input and output connected to the caller, for a conversation with a process that
// keeps running (the verifier of package reward talks to the solution this way). The
// command is built and watched by the same code as Run: same flags, cgroup (a command
// cgroup in the sandbox's, so its memory and processes count with every other command
// of the sandbox), rlimits, timeout, kills and disk quota; the bytes the caller reads
// from its standard output count towards KillOutputLimit with its standard error, and
// its standard error is kept as for Run.
//
// # Files
//
// ReadFile, WriteFile and FS run on the host with the library's privileges, so they
// go through an [os.Root] opened on the workspace: a symlink the code planted (to
// /etc/passwd, to "../x") cannot lead them outside, and FIFOs, sockets and devices are
// refused ([ErrNotRegular]) so a planted FIFO cannot block the host. Hard links to
// host files cannot be made from inside: the workspace is its own mount, and link(2)
// does not cross mounts; WriteFile still refuses a file with other hard links
// ([ErrHardLinked]), which matters in unconfined mode.
//
// # Walking the workspace
//
// Two host-side tasks walk the whole tree the agent left: [Sandbox.Restore] and the
// quota check of a walked workspace ([StorageWalk]). Both go by directory
// descriptors: each directory is opened once, by name, relative to its parent's
// descriptor (openat with O_NOFOLLOW|O_DIRECTORY), listed with getdents, and every
// entry is looked at and changed relative to that descriptor (fstatat and fchmodat
// with AT_SYMLINK_NOFOLLOW; before Linux 6.6, a chmod of an O_PATH descriptor
// through /proc/self/fd, as the C libraries do). A symlink is never followed, and
// the cost of a level does not depend on its depth. A walk by paths from the
// workspace's root (as [os.Root] resolves them, one component at a time) costs the
// square of the depth: before, Restore of a chain of directories of mode 000 2,000
// deep took 4.1 s of host CPU and 10,000 deep 110 s, and in a walked workspace a
// "true" after a chain of 10,000 took 108 s of host CPU in quota walks, where one
// command of the agent builds a chain of 100,000 in about 3 s. A directory of mode
// 000 is given its bits (fchmodat on the parent's descriptor) before it is opened.
//
// The walk is depth-first with an explicit stack, not recursion, and its
// descriptors are bounded, not one per level: a directory is kept open only while
// it has subdirectories left to visit, and at most 64 such are open (the walk holds
// at most 67 descriptors, the root's included). A directory whose last subdirectory
// is taken closes before the walk goes down into it, so a chain of any depth costs
// two. Past 64 waiting directories, the shallowest is closed; when the walk comes
// back up to it, it is reopened by ".." from the directory the walk has just left
// ("../../.." for as many levels as it came up, 1,024 per openat), and it must be
// the same directory (device and inode, recorded when it was first opened), else it
// is given up with every closed directory above it. Each reopening resolves the
// levels the walk has just come back up, so reopening adds work linear in the
// directories, and an inode check cannot be fooled by a rename: a directory cannot
// be moved out of the workspace (rename does not cross mounts), the directories
// above the workspace are not its own, and a directory that took a recorded
// directory's place is the workspace's too. The alternatives were worse: holding a
// descriptor per level (100,000 descriptors), reopening by name from the root (the
// square of the depth again) or from checkpoints every k levels (more descriptors
// as the depth grows, and k times the work). Renames can only happen in the quota
// check, which runs while the command does; Restore runs when none does.
//
// Each walk visits at most [MaxWorkspaceEntries] entries. Restore stops there and
// reports nothing (the entries left are the agent's own to lose); the quota check
// counts the workspace over its quota. Restore also checks its time every 1,024
// entries and directories against [RestoreTimeout] (and ctx): past it, its error
// wraps [rollout.ErrRestoreBudget], which the verifier scores as the solution's
// fault; ctx's end stays ctx's error.
//
// Close removes the sandbox's directory the same way: each directory
// opened once from its parent's descriptor (given its owner's bits first), its
// other entries unlinked, and the removal climbs back by ".." (checked against the
// parent's device and inode) to remove it, holding two descriptors. os.RemoveAll,
// used before, holds one per level: a chain deeper than the process's limit on
// descriptors failed with EMFILE (every other open of the process failing
// meanwhile) and left the chain on disk.
//
// # What is contained, and what is not
//
// Contained: network access (no interface but loopback), writes outside the
// workspace (read-only root, private /tmp), reads of host files other than /usr and
// the /etc pieces above, nested user namespaces, capabilities, sysctl writes,
// signals to host processes (separate pid namespace), fork bombs (the cgroup's pids
// limit, or RLIMIT_NPROC without a cgroup, then the timeout), memory (the cgroup;
// RLIMIT_AS per process), CPU (RLIMIT_CPU and the wall clock), single-file size
// (RLIMIT_FSIZE), workspace size, output volume, and leftover processes.
//
// If the library process itself is killed (SIGKILL) mid-command, Pdeathsig on bwrap and
// --die-with-parent take the sandbox down with it; only in the few milliseconds while
// bwrap is still setting a sandbox up can its namespace init be left behind, idle
// (bubblewrap arms its parent-death signal after that point).
//
// Disk: RLIMIT_FSIZE caps each file, and Config.DiskQuota (1 GiB) the workspace (see
// Storage above).
//
// Not contained: CPU shares (the cgroup holds memory and processes, not CPU; the
// wall-clock timeout and RLIMIT_CPU bound CPU time); kernel vulnerabilities reachable
// from an unprivileged user namespace. Without a cgroup, memory and processes hold
// per process only (see above). Everything
// under /usr is readable, by design (the interpreter and its libraries live there).
// When the library does not run as root, the code runs as the library's own uid:
// the mount namespace still hides the host's files, but RLIMIT_NPROC then counts
// against that uid inside the sandbox's user namespace only.
//
// # Probe and failure modes
//
// [New] runs Config.Python with the full flag list in a fresh workspace, as the
// sandbox uid. Without bwrap it fails with [ErrBwrapNotFound] and says how to install
// it (apt-get install -y --no-install-recommends bubblewrap); when the kernel, a
// container's seccomp profile or an LSM refuses the namespaces, with
// [ErrNamespacesDenied]; an interpreter or base directory the sandbox uid cannot
// reach (for example under a 0700 home directory) gives [ErrProbeFailed]. A probe
// that fails inside the sandbox cgroup for another reason is run once more without
// it; if that passes, the factory works with the rlimit fallback, and says so. There is no
// silent fallback: a caller who accepts running without isolation retries with
// Config.Unconfined set.
//
// # Unconfined mode
//
// Config.Unconfined (an explicit opt-in, for machines where namespaces are not
// available) keeps the API, the workspace, the timeouts, the rlimits, the uid drop
// when root, the process-group kill and the output caps, but isolates nothing: the
// network, the host file system and the host's processes are open to the code, and
// the workspace is at its host path ([Sandbox.Dir]). Every result has Unconfined set.
// The cgroup and the storage bound apply as under bubblewrap. Children that leave the
// process group (setsid) are killed when the command ends: with a cgroup, as
// everything left in the command's cgroup; without one, found by a per-command marker
// in their environment, which a process that re-executes itself with a cleared
// environment escapes. Without a cgroup RLIMIT_NPROC counts every process of the
// uid, so concurrent unconfined sandboxes share it.
//
// The Landlock fallback of the design reference is not implemented.
//
// # Cost
//
// BenchmarkRunTrue measures the spawn overhead of a trivial command (bwrap, prlimit,
// /bin/true and the Go side, through Run). As root each command started /bin/sh (the
// cgroup v1 join) and unshare(1) before bwrap until bwrap was held at its options;
// docs/performance.md has the figures of that change. On 2 shared cores under load
// (load average 8 to 10), earlier, it measured 12 to 20 ms per command (median 14.6)
// against 12 to 19 ms for the same bwrap command line exec'd directly
// (BenchmarkBwrapDirect), and 2 to 4 ms unconfined; python3 -c pass took about 22
// ms. The Go side (pipes, status stream, waiting for the pid namespace, quota check)
// adds about 1.5 ms; the rest is bwrap and namespace set-up. The design reference measured about 12 ms for bwrap
// plus python3 on an idle machine.
//
// Image sandboxes: BenchmarkImageRunTrue runs /bin/true in a plain and in an image
// sandbox alternately, in one run: on 2 shared cores (load average 3 to 9) the image
// sandbox took 19.7 to 34.7 ms per command against 20.6 to 33.5 ms for the plain one,
// a ratio of 0.75 to 1.04 over three runs (the extra mounts are made once, at
// creation). BenchmarkImageWorkspace10k makes image sandboxes whose working
// directory holds 10,000 files: 10 to 14 ms per sandbox with the overlay (its
// directory, tmpfs, two overlays, the idmapped mounts and its cgroup), 600 to 680 ms
// with the copy fallback. Without root (TestImageSandboxWithoutRoot logs it), a
// sandbox of the toy repository's image (an unpacked root already cached) took 13
// to 24 ms to make over four runs on 2 shared cores (load average 10 to 13): its
// directory, the holder (unshare, sh, three mount(8) runs, cat) and the writes
// between them.
//
// Go repositories: BenchmarkVerifyGoTask (package reward) grades the Go toy task of
// testdata/swe-go (two small packages, go test -v ./..., Go 1.19 without Debian's
// compiled standard library, as Go 1.20 and later ship none) with its gold patch: on
// 2 shared cores (load average 2 to 4) 0.55 s per grading with the warm cache,
// against 11.4 s from an empty one, which compiles the standard library's packages
// the tests import every time (median of three). The first sandbox of the image
// (pull, unpack and warm-up) took 13 to 20 s, once.
//
// Enforcing the limits while a command runs: BenchmarkIdleCommand100k runs "sleep 1"
// in a workspace of 99,900 entries and reports the CPU of the library's process over
// the wall time. On 2 shared cores (load average 6 to 9) it measured 0.3 to 0.5% of
// a core with a tmpfs workspace (the Go side of the command included) and 0.3 to
// 3.8% with the walked fallback over 10 commands, depending on how many walks fall
// in the window (a walk of the 100k entries costs a few hundred milliseconds and the
// next waits 40 times as long).
//
// Walking the agent's tree: BenchmarkRestoreDeepChain restores a chain of directories
// of mode 000 in a tmpfs workspace, BenchmarkRestoreManyFiles 99,999 files of mode
// 000 in 100 directories of mode 000, BenchmarkQuotaWalkDeepChain runs "true" in a
// walked workspace that holds a chain; each reports the host CPU of the call. On 2
// shared cores (load average 4 to 14), Restore took 0.005 s of CPU for a chain of
// 2,000, 0.03 s for 10,000, 0.34 s for 99,999, and 0.16 s for the 99,999 files
// (before the walk by descriptors: 4.1 s and 110 s for the first two); the command
// in the walked workspace 0.006 s with a chain of 2,000, 0.019 s with 10,000 and
// 0.18 s with 99,999 (before: 2.6 s and 108 s for the first two).
package bwrap
