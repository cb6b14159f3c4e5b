package sandbox

import (
	"errors"
	"io/fs"
)

var errOverQuota = errors.New("over quota")

// overQuota measures the workspace through its os.Root (so a symlink swapped in
// mid-walk cannot lead outside) and reports whether it holds more than
// Config.DiskQuota bytes or more than MaxWorkspaceEntries entries. Sizes are
// apparent sizes of regular files.
func (s *Sandbox) overQuota() bool {
	quota := s.f.cfg.DiskQuota
	if quota < 0 {
		return false
	}
	var total, entries int64
	err := fs.WalkDir(s.root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: skip it
		}
		entries++
		if entries > MaxWorkspaceEntries {
			return errOverQuota
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		if total > quota {
			return errOverQuota
		}
		return nil
	})
	return errors.Is(err, errOverQuota)
}
