package bwrap_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// hostileTarget is what a hostile case attacks: a factory's sandboxes, plain or, with
// spec, over an image's root (NewSandboxFor).
type hostileTarget struct {
	*bwrap.Factory
	spec *rollout.SandboxSpec
	// imageDir is the image's root on the host: nothing may be written there, and
	// its path must not show inside.
	imageDir string
}

// sandbox makes a sandbox of the target, closed at the end of the test.
func (h hostileTarget) sandbox(t testing.TB) *bwrap.Sandbox {
	t.Helper()
	if h.spec == nil {
		return newSandbox(t, h.Factory)
	}
	return newImageSandbox(t, h.Factory, *h.spec)
}

// hostileCases runs the suite's cases against the target's factories (a tmpfs
// workspace, a walked one, one without quota), each case's name prefixed.
func hostileCases(t *testing.T, prefix string, f, walk, noQuota hostileTarget, secret string) {
	t.Run(prefix+"cases", func(t *testing.T) {
		if prefix == "" {
			t.Run("IdleOn100kEntries", func(t *testing.T) {
				t.Parallel()
				hostileIdle100k(t)
			})
		}
		// First and alone: it measures the host's allocations.
		t.Run("ReadFile1GiB", func(t *testing.T) { hostileReadFile1GiB(t, f) })
		for name, fn := range map[string]func(*testing.T, hostileTarget){
			"ForkBomb":             hostileForkBomb,
			"MemoryOneProcess":     hostileMemoryOne,
			"MemoryEightProcesses": hostileMemoryEight,
			"MemoryMemfd":          hostileMemfd,
			"MemoryTmpfs":          hostileMemTmpfs,
			"LoopWithSetsid":       hostileLoop,
			"Network":              hostileNetwork,
			"WritesOutside":        hostileWrites,
			"ReadHostFile":         func(t *testing.T, f hostileTarget) { hostileReadHost(t, f, secret) },
			"Signals":              hostileSignals,
			"Stdout1GB":            hostileStdout,
			"Daemon":               hostileDaemon,
			"SymlinkFileTools":     func(t *testing.T, f hostileTarget) { hostileSymlinks(t, f, secret) },
			"HardLink":             hostileHardLink,
			"QuotaFilesTmpfs":      hostileQuotaFiles,
			"QuotaDeletedOpen":     hostileQuotaDeleted,
			"SearchCraftedPattern": hostileSearchPattern,
			"FileToolDeadlines":    hostileFileToolDeadlines,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fn(t, f)
			})
		}
		t.Run("QuotaFilesWalk", func(t *testing.T) {
			t.Parallel()
			hostileQuotaFiles(t, walk)
		})
		t.Run("QuotaDeletedOpenWalk", func(t *testing.T) {
			t.Parallel()
			hostileQuotaDeleted(t, walk)
		})
		// Every workspace mode bubblewrap runs with: a tmpfs (root), a walked
		// directory, a directory without quota. (Unconfined mode isolates nothing:
		// its commands run in the workspace at its host path, and its factory says
		// so in Enforcement.HostPathVisible.)
		for _, m := range []struct {
			name    string
			f       hostileTarget
			storage bwrap.StorageMode
		}{{"Tmpfs", f, bwrap.StorageTmpfs}, {"Walk", walk, bwrap.StorageWalk}, {"NoQuota", noQuota, bwrap.StorageNone}} {
			t.Run("NoHostInformation"+m.name, func(t *testing.T) {
				t.Parallel()
				if m.storage == bwrap.StorageTmpfs && m.f.Enforcement().Storage != m.storage {
					t.Skipf("no tmpfs workspace on this host: %s", m.f.Enforcement().StorageMissing)
				}
				e := m.f.Enforcement()
				require.Equal(t, m.storage, e.Storage)
				if os.Geteuid() == 0 {
					require.Empty(t, e.HostPathVisible, "as root no mode shows a host path")
				} else if e.HostPathVisible != "" {
					t.Skipf("the factory reports that the workspace's host path is visible: %s", e.HostPathVisible)
				}
				hostileNoHostInfo(t, m.f)
			})
		}
	})
}
