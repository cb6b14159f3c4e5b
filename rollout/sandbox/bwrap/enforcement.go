package bwrap

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
)

// Enforcement says how a Factory's limits are enforced.
type Enforcement struct {
	// Cgroup is the cgroup layout holding Limits.Memory and Limits.Processes for
	// each whole sandbox, or [CgroupNone].
	Cgroup CgroupMode
	// CgroupDirs are the directories under which sandbox cgroups are created (v2:
	// one; v1: the memory then the pids controller's).
	CgroupDirs []string
	// CgroupMissing says why there is no cgroup (empty when there is one).
	CgroupMissing string
	// PerProcessOnly names the limits that, without a cgroup, hold per process
	// only (empty with a cgroup).
	PerProcessOnly []string
	// Storage is how the workspace's size is bounded.
	Storage StorageMode
	// StorageMissing says why the workspace is not a tmpfs (empty when it is, or
	// when there is no quota).
	StorageMissing string
	// HostPathVisible says why the code inside can see the workspace's host path
	// (in /proc/self/mountinfo, or as its working directory when unconfined);
	// empty when it cannot: under bubblewrap a workspace that is not a tmpfs is an
	// overlay of its own, mounted by the library as root and in a user namespace
	// otherwise (see the package documentation, Storage), and this says why where
	// no overlay could be made. It also names the prefix of a Config.Python outside
	// /usr, which is bound at its host path.
	HostPathVisible string
}

// Enforcement reports how the limits are enforced, as found when the factory was
// made. [New] logs it, at warn level when there is no cgroup.
func (f *Factory) Enforcement() Enforcement {
	e := f.enforcement
	e.CgroupDirs = slices.Clone(e.CgroupDirs)
	e.PerProcessOnly = slices.Clone(e.PerProcessOnly)
	return e
}

// perProcessOnly names the limits that hold per process only without a cgroup.
var perProcessOnly = []string{
	"memory: Limits.AddressSpace (RLIMIT_AS) per process; Limits.Memory is not enforced, and memfd and tmpfs memory are not counted",
	"processes: Limits.Processes as RLIMIT_NPROC, per user namespace under bubblewrap and per uid unconfined; no pids cgroup",
}

// detectEnforcement finds the cgroup layout and whether workspaces can be tmpfs.
func (f *Factory) detectEnforcement() {
	cfg := f.cfg
	e := &f.enforcement
	switch {
	case cfg.DisableCgroup:
		e.CgroupMissing = "Config.DisableCgroup is set"
	default:
		self, err := os.ReadFile("/proc/self/cgroup")
		if err == nil {
			var h cgroupHost
			if h, err = detectCgroup(cgroupRoot, self, cfg.CgroupParent); err == nil {
				err = h.check(f.uid(), f.gid())
			}
			if err == nil {
				f.cg = &h
				e.Cgroup = h.mode
				e.CgroupDirs = h.dirs()
			}
		}
		if err != nil {
			e.CgroupMissing = err.Error()
			if errors.Is(err, fs.ErrPermission) {
				e.CgroupMissing += "; run as root, or set Config.CgroupParent to a cgroup delegated to this user"
			}
		}
	}
	if e.Cgroup == CgroupNone {
		e.PerProcessOnly = perProcessOnly
	}
	switch {
	case cfg.DiskQuota < 0:
	case !f.asRoot:
		e.Storage, e.StorageMissing = StorageWalk, "not root: a tmpfs per workspace needs CAP_SYS_ADMIN"
	case cfg.DisableWorkspaceMount:
		e.Storage, e.StorageMissing = StorageWalk, "Config.DisableWorkspaceMount is set"
	default:
		if err := checkMount(cfg.BaseDir); err != nil {
			e.Storage, e.StorageMissing = StorageWalk, err.Error()
		} else {
			e.Storage = StorageTmpfs
		}
	}
	f.detectOverlay()
}

// detectOverlay decides, once Storage is known, whether a workspace that is not a
// tmpfs is mounted as an overlay of its own, which keeps its host path out of
// /proc/self/mountinfo inside; otherwise it says why the path is visible.
func (f *Factory) detectOverlay() {
	e := &f.enforcement
	switch {
	case f.cfg.Unconfined:
		e.HostPathVisible = "Config.Unconfined: commands run in the workspace at its host path"
	case e.Storage == StorageTmpfs:
	case !f.asRoot:
		if err := checkHolder(context.Background(), f.cfg.BaseDir); err != nil {
			e.HostPathVisible = "no overlay in a user namespace (" + err.Error() + "): the workspace is a directory bound into the sandbox, " +
				"and /proc/self/mountinfo inside shows its path within its file system"
		} else {
			f.overlayNS = true
		}
	default:
		if err := checkOverlay(f.cfg.BaseDir); err != nil {
			e.HostPathVisible = "no overlay in Config.BaseDir (" + err.Error() + "): the workspace is a directory bound into the sandbox, " +
				"and /proc/self/mountinfo inside shows its path within its file system"
		} else {
			f.overlay = true
		}
	}
}

// withoutCgroup drops the cgroup after err showed it unusable.
func (f *Factory) withoutCgroup(err error) *Factory {
	f.cg = nil
	f.enforcement.Cgroup = CgroupNone
	f.enforcement.CgroupDirs = nil
	f.enforcement.CgroupMissing = "the probe failed in a cgroup: " + err.Error()
	f.enforcement.PerProcessOnly = perProcessOnly
	return f
}
