package images_test

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/images"
)

// TestHostileLayers unpacks layers crafted to reach outside the root, or to bring
// privileges in. Each either fails with an error that names the entry, or unpacks
// to a root that holds the listed tree; the host outside stays as it was, checked
// through a directory and a file the attacks aim at.
func TestHostileLayers(t *testing.T) {
	outside := t.TempDir() // the host directory the attacks aim at
	victim := filepath.Join(outside, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("host"), 0o644))
	rel := strings.Repeat("../", 30) + strings.TrimPrefix(outside, "/")

	cases := []struct {
		name   string
		layers [][]ent
		err    string   // non-empty: Root fails with this
		want   []string // else the root's tree
	}{
		{
			name:   "dotdot name",
			layers: [][]ent{{{name: "../../../../../../" + strings.TrimPrefix(victim, "/"), body: "pwned"}}},
			err:    `leaves the root through ".."`,
		},
		{
			name:   "dotdot inside name",
			layers: [][]ent{{{name: "a/../../x", body: "pwned"}}},
			err:    `leaves the root through ".."`,
		},
		{
			name:   "absolute name is inside the root",
			layers: [][]ent{{{name: victim, body: "pwned"}}},
			want:   append(parents(outside), strings.TrimPrefix(victim, "/")+" = pwned"),
		},
		{
			name: "absolute symlink followed by a later entry",
			layers: [][]ent{
				{{name: "evil", typ: tar.TypeSymlink, link: outside}},
				{{name: "evil/victim", body: "pwned"}},
			},
			want: append(parents(outside), "evil -> "+outside, strings.TrimPrefix(victim, "/")+" = pwned"),
		},
		{
			name: "relative symlink climbing out, same layer",
			layers: [][]ent{{
				{name: "a/", typ: tar.TypeDir},
				{name: "a/evil", typ: tar.TypeSymlink, link: rel},
				{name: "a/evil/victim", body: "pwned"},
			}},
			want: append(parents(outside), "a/", "a/evil -> "+rel, strings.TrimPrefix(victim, "/")+" = pwned"),
		},
		{
			name: "symlink chain",
			layers: [][]ent{{
				{name: "l1", typ: tar.TypeSymlink, link: "l2"},
				{name: "l2", typ: tar.TypeSymlink, link: "/l3/.."},
				{name: "l3", typ: tar.TypeSymlink, link: outside},
				{name: "l1/x", body: "root-level"},
			}},
			// /l3/.. is the parent of l3's target, as the kernel resolves it
			want: append(parents(filepath.Dir(outside)), "l1 -> l2", "l2 -> /l3/..", "l3 -> "+outside,
				strings.TrimPrefix(filepath.Dir(outside), "/")+"/x = root-level"),
		},
		{
			name: "symlink loop",
			layers: [][]ent{{
				{name: "loop", typ: tar.TypeSymlink, link: "loop/x"},
				{name: "loop/y", body: "z"},
			}},
			err: "too many symlinks",
		},
		{
			name: "file written over a symlink to the host",
			layers: [][]ent{
				{{name: "link", typ: tar.TypeSymlink, link: victim}},
				{{name: "link", body: "pwned"}},
			},
			want: []string{"link = pwned"},
		},
		{
			name: "directory over a symlink to the host",
			layers: [][]ent{
				{{name: "d", typ: tar.TypeSymlink, link: outside}},
				{{name: "d/", typ: tar.TypeDir, mode: 0o777}},
			},
			want: []string{"d/"},
		},
		{
			name:   "hard link climbing out",
			layers: [][]ent{{{name: "h", typ: tar.TypeLink, link: "../../../../../../" + strings.TrimPrefix(victim, "/")}}},
			err:    `leaves the root through ".."`,
		},
		{
			name:   "hard link to an absolute host path",
			layers: [][]ent{{{name: "h", typ: tar.TypeLink, link: victim}}},
			err:    "no such file",
		},
		{
			name: "hard link through an absolute symlink",
			layers: [][]ent{{
				{name: "s", typ: tar.TypeSymlink, link: outside},
				{name: "h", typ: tar.TypeLink, link: "s/victim"},
			}},
			err: "no such file",
		},
		{
			name:   "hard link to a directory",
			layers: [][]ent{{{name: "d/", typ: tar.TypeDir}, {name: "h", typ: tar.TypeLink, link: "d"}}},
			err:    "not a regular file",
		},
		{
			name: "whiteout through a symlink to the host",
			layers: [][]ent{
				{{name: "s", typ: tar.TypeSymlink, link: outside}},
				{{name: "s/.wh.victim", typ: tar.TypeReg}},
			},
			want: []string{"s -> " + outside},
		},
		{
			name: "opaque directory through a symlink to the host",
			layers: [][]ent{
				{{name: "s", typ: tar.TypeSymlink, link: outside}},
				{{name: "s/.wh..wh..opq", typ: tar.TypeReg}},
			},
			want: []string{"s -> " + outside},
		},
		{
			name:   "whiteout climbing out",
			layers: [][]ent{{{name: "../.wh.victim", typ: tar.TypeReg}}},
			err:    `leaves the root through ".."`,
		},
		{
			name: "device nodes and fifos are not made",
			layers: [][]ent{{
				{name: "dev/", typ: tar.TypeDir},
				{name: "dev/mem", typ: tar.TypeChar, mode: 0o666},
				{name: "dev/sda", typ: tar.TypeBlock, mode: 0o666},
				{name: "fifo", typ: tar.TypeFifo, mode: 0o666},
			}},
			want: []string{"dev/"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var layers []v1.Layer
			for _, l := range tc.layers {
				layers = append(layers, tarLayer(t, l...))
			}
			c := newCache(t, images.CacheConfig{})
			r, err := c.Root(context.Background(), layoutRef(t, imageOf(t, v1.Config{}, layers...)))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, "entry ", "the error names the entry")
				roots, rerr := os.ReadDir(filepath.Join(c.Dir(), "roots"))
				require.NoError(t, rerr)
				require.Empty(t, roots, "a failed unpack leaves no root")
			} else {
				require.NoError(t, err)
				defer r.Release()
				want := append([]string(nil), tc.want...)
				sort.Strings(want)
				if d := cmp.Diff(want, tree(t, r.Dir)); d != "" {
					t.Errorf("root (-want +got):\n%s", d)
				}
			}
			nothingLeft(t, c)
			b, err := os.ReadFile(victim)
			require.NoError(t, err)
			require.Equal(t, "host", string(b), "the host file is untouched")
			names, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Len(t, names, 1, "nothing new in the host directory")
			fi, err := os.Stat(victim)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "the host file's mode is untouched")
		})
	}
}

// parents lists the directories of an absolute path as a root's tree shows them.
func parents(dir string) []string {
	var out []string
	p := ""
	for _, c := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		p += c + "/"
		out = append(out, p)
	}
	return out
}

// TestSetuidBitsDropped: no file of an image keeps setuid or setgid (were the root
// mounted without nosuid, such a file would run with its owner's ids), nor group
// or other write (any host user could change the root every sandbox of the image
// reads); a directory's sticky bit stays (/tmp's).
func TestSetuidBitsDropped(t *testing.T) {
	l := tarLayer(t,
		ent{name: "suid", body: "x", mode: 0o4755},
		ent{name: "sgid", body: "x", mode: 0o2755},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		ent{name: "sgiddir/", typ: tar.TypeDir, mode: 0o2775},
		ent{name: "shared", body: "x", mode: 0o666},
		ent{name: "writeonly", body: "x", mode: 0o200},
	)
	c := newCache(t, images.CacheConfig{})
	dir := root(t, c, layoutRef(t, imageOf(t, v1.Config{}, l)))
	want := map[string]os.FileMode{
		"suid":      0o755,
		"sgid":      0o755,
		"tmp":       os.ModeDir | os.ModeSticky | 0o755,
		"sgiddir":   os.ModeDir | 0o755,
		"shared":    0o644,
		"writeonly": 0o600,
	}
	got := map[string]os.FileMode{}
	for n := range want {
		fi, err := os.Lstat(filepath.Join(dir, n))
		require.NoError(t, err)
		got[n] = fi.Mode()
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("modes (-want +got):\n%s", d)
	}
}
