package images

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLayer unpacks arbitrary bytes as two layers (the input is split in two at its
// first byte's position) into a root beside a host directory: whatever happens,
// error or not, the host directory is untouched, and the root holds no device node,
// FIFO, setuid or setgid file.
//
//	go test -run '^$' -fuzz FuzzLayer -fuzztime 60s -fuzzminimizetime 5x ./images
//
// (Minimizing an input costs one unpack per try: -fuzzminimizetime keeps it short.)
func FuzzLayer(f *testing.F) {
	for _, seed := range [][]tarEnt{
		{{"evil", tar.TypeSymlink, "", "../outside"}, {"evil/victim", tar.TypeReg, "x", ""}},
		{{"evil", tar.TypeSymlink, "", "/"}, {"evil/../outside/victim", tar.TypeReg, "x", ""}},
		{{"h", tar.TypeLink, "", "../outside/victim"}},
		{{"d/", tar.TypeDir, "", ""}, {"d/.wh..wh..opq", tar.TypeReg, "", ""}, {".wh.d", tar.TypeReg, "", ""}},
		{{"s", tar.TypeSymlink, "", "../outside"}, {"s/.wh.victim", tar.TypeReg, "", ""}},
		{{"dev", tar.TypeChar, "", ""}, {"suid", tar.TypeReg, "x", ""}},
	} {
		f.Add(append([]byte{0}, tarOf(f, seed)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cut := int(data[0]) * len(data) / 256
		layers := [][]byte{data[1:max(cut, 1)], data[max(cut, 1):]}
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, "root")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		u := newUnpacker(r, false, 0, 0, 1<<20)
		defer u.close()
		for _, l := range layers {
			if err := u.layer(bytes.NewReader(l)); err != nil {
				break
			}
		}
		_ = u.finish()
		ents, err := os.ReadDir(outside)
		if err != nil || len(ents) != 1 {
			t.Fatalf("the host directory changed: %v %v", ents, err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "victim")); err != nil || string(b) != "host" {
			t.Fatalf("the host file changed: %q %v", b, err)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 2 {
			t.Fatalf("something was made beside the root: %v", ents)
		}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			m := fi.Mode()
			if m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Fatalf("%s has mode %v", p, m)
			}
			return nil
		})
	})
}

type tarEnt struct {
	name string
	typ  byte
	body string
	link string
}

func tarOf(tb testing.TB, ents []tarEnt) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o6755, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}
