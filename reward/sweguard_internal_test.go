package reward

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestPackageTreeShadows(t *testing.T) {
	st := startState{
		modules:  map[string]bool{"pytest": true, "json": true, "pluggy": true},
		inits:    map[string]bool{"pkg/__init__.py": true, "pkg/sub/__init__.py": true},
		pathDirs: map[string]bool{"src": true},
	}
	pkgs := []string{"pkg", "pkg/sub", "pkg/new", "src", "pytest", "json"}
	tree := newPackageTree(st, pkgs)
	for p, want := range map[string]bool{
		"pytest.py":             true,  // at the top
		"pytest.cpython-39.so":  true,  // any importable form
		"json/__init__.py":      true,  // a package the agent made, named as a module
		"pytest/anything.py":    true,  // inside such a package
		"pkg/json.py":           false, // inside a package: pkg.json
		"pkg/sub/pytest.py":     false,
		"pkg/new/json.py":       false, // a package the agent made inside one
		"lib/json.py":           true,  // a directory that is no package may be on sys.path
		"lib/deep/er/pluggy.py": true,
		"src/pluggy.py":         true,  // on the image's path: a package there is no cover
		"src/mine.py":           false, // a name the image does not provide
		"pkg/README":            false,
		"notes.txt":             false,
	} {
		if got := tree.shadows(p, st); got != want {
			t.Errorf("shadows(%q) = %v, want %v", p, got, want)
		}
	}
	if tree.shadows("pytest.py", startState{}) {
		t.Error("a task that runs no Python has nothing to shadow")
	}
}

// BenchmarkPackageTreeDeepPaths: the guard's work per byte of added paths stays the
// same however deep they are (ns/byte), where a check that resolved every parent
// from the top grew with the square of the depth.
func BenchmarkPackageTreeDeepPaths(b *testing.B) {
	for _, depth := range []int{24, 240, 2000} {
		b.Run(fmt.Sprint(depth), func(b *testing.B) {
			dir := strings.Repeat("a/", depth)
			var added, pkgs []string
			for i := range 1600 {
				added = append(added, fmt.Sprintf("%sf%d.py", dir, i))
			}
			for i := 1; i <= depth; i++ {
				pkgs = append(pkgs, strings.TrimSuffix(dir[:2*i], "/"))
			}
			st := startState{modules: map[string]bool{"json": true}, inits: map[string]bool{}}
			bytes := 0
			for _, p := range append(slices.Clone(added), pkgs...) {
				bytes += len(p)
			}
			for b.Loop() {
				tree := newPackageTree(st, pkgs)
				for _, p := range added {
					tree.shadows(p, st)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bytes), "ns/byte")
		})
	}
}
