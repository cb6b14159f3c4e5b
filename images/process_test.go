package images_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/internal/testctx"
)

// TestMain runs the child process of the tests with processes when
// IMAGES_CHILD_DIR is set (the cache directory; IMAGES_CHILD_REF is the image): it
// waits for a line on stdin, takes the root, prints a report line, then holds the
// root until stdin closes. Otherwise it runs the tests, then looks for leaked
// goroutines.
func TestMain(m *testing.M) {
	if dir := os.Getenv("IMAGES_CHILD_DIR"); dir != "" {
		if err := child(dir, os.Getenv("IMAGES_CHILD_REF")); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type childReport struct {
	Dir   string
	Stats images.Stats
}

func child(dir, ref string) error {
	c, err := images.NewCache(images.CacheConfig{Dir: dir, MaxBytes: -1})
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("READY")
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	r, err := c.Root(context.Background(), ref)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(childReport{Dir: r.Dir, Stats: c.Stats()})
	fmt.Println(string(b))
	_, _ = io.Copy(io.Discard, in) // hold the root until stdin closes
	r.Release()
	return nil
}

// proc is a child process taking a root from the cache at dir.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChild(t *testing.T, dir, ref string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "IMAGES_CHILD_DIR="+dir, "IMAGES_CHILD_REF="+ref)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.Equal(t, "READY", p.line(t))
	return p
}

func (p *proc) line(t *testing.T) string {
	t.Helper()
	if !p.out.Scan() {
		t.Fatalf("child ended: %v", p.out.Err())
	}
	return p.out.Text()
}

func (p *proc) report(t *testing.T) childReport {
	t.Helper()
	l := p.line(t)
	var r childReport
	require.NoError(t, json.Unmarshal([]byte(l), &r), "child said %q", l)
	return r
}

// bigImage is an image of n files of size bytes each, in one layer.
func bigImage(t *testing.T, n, size int, tag string) v1.Image {
	t.Helper()
	body := strings.Repeat(tag, size/len(tag)+1)[:size]
	var ents []ent
	for i := range n {
		ents = append(ents, ent{name: fmt.Sprintf("d%d/f%d", i%10, i), body: body})
	}
	return imageOf(t, v1.Config{WorkingDir: "/d0"}, tarLayer(t, ents...))
}

// TestTwoProcessesUnpackOnce starts two processes that take the same image from one
// cache directory at the same moment: it is unpacked once, and both get it.
func TestTwoProcessesUnpackOnce(t *testing.T) {
	dir := reachableDir(t)
	ref := layoutRef(t, bigImage(t, 3000, 1000, "two"))
	a, b := startChild(t, dir, ref), startChild(t, dir, ref)
	_, err := io.WriteString(a.stdin, "go\n")
	require.NoError(t, err)
	_, err = io.WriteString(b.stdin, "go\n")
	require.NoError(t, err)
	ra, rb := a.report(t), b.report(t)
	require.Equal(t, ra.Dir, rb.Dir)
	require.Equal(t, images.Stats{Unpacks: 1, Hits: 1},
		images.Stats{Unpacks: ra.Stats.Unpacks + rb.Stats.Unpacks, Hits: ra.Stats.Hits + rb.Stats.Hits},
		"one unpack between the two processes")
	ents, err := os.ReadDir(filepath.Join(ra.Dir, "d3"))
	require.NoError(t, err)
	require.Len(t, ents, 300)
	a.stdin.Close()
	b.stdin.Close()
	require.NoError(t, a.cmd.Wait())
	require.NoError(t, b.cmd.Wait())
	c := newCache(t, images.CacheConfig{Dir: dir})
	nothingLeft(t, c)
}

// TestEvictionSparesRootsInUse bounds a cache to about one image: an image another
// process holds, and one this process holds, are never evicted; once the other
// process is killed (SIGKILL: its locks go with it) and this one releases its
// image, both are.
func TestEvictionSparesRootsInUse(t *testing.T) {
	dir := reachableDir(t)
	refA := layoutRef(t, bigImage(t, 4, 16<<10, "a"))
	refB := layoutRef(t, bigImage(t, 4, 16<<10, "b"))
	refC := layoutRef(t, bigImage(t, 4, 16<<10, "c"))
	holder := startChild(t, dir, refA)
	_, err := io.WriteString(holder.stdin, "go\n")
	require.NoError(t, err)
	dirA := holder.report(t).Dir

	c := newCache(t, images.CacheConfig{Dir: dir, MaxBytes: 120 << 10})
	rB, err := c.Root(context.Background(), refB)
	require.NoError(t, err)
	require.DirExists(t, dirA, "another process holds A")
	rC, err := c.Root(context.Background(), refC)
	require.NoError(t, err)
	defer rC.Release()
	require.DirExists(t, dirA, "another process holds A")
	require.DirExists(t, rB.Dir, "this process holds B")
	require.Equal(t, int64(0), c.Stats().Evictions)

	require.NoError(t, holder.cmd.Process.Kill())
	_ = holder.cmd.Wait()
	rB.Release()
	rB.Release() // a second call is a no-op
	require.NoDirExists(t, dirA, "A: least recently used, no longer held")
	require.NoDirExists(t, rB.Dir, "B: released, older than C")
	require.DirExists(t, rC.Dir, "C is in use")
	require.Equal(t, int64(2), c.Stats().Evictions)
	nothingLeft(t, c)

	// B again: resolved before, evicted since, so it is unpacked again.
	rB2, err := c.Root(context.Background(), refB)
	require.NoError(t, err)
	defer rB2.Release()
	require.DirExists(t, rB2.Dir)
	require.Equal(t, int64(3), c.Stats().Unpacks)
}

// stallingRegistry is a registry whose layer downloads (gzip blobs) stop halfway
// until release is closed or the request ends. The channel it returns is closed
// when a download first stops.
func stallingRegistry(t *testing.T, release <-chan struct{}) (string, <-chan struct{}) {
	t.Helper()
	stalled := make(chan struct{})
	var once sync.Once
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		if len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b { // not a gzip layer
			w.Write(body)
			return
		}
		half := len(body) / 2
		w.Write(body[:half])
		w.(http.Flusher).Flush()
		once.Do(func() { close(stalled) })
		select {
		case <-release:
			w.Write(body[half:])
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Host, stalled
}

// TestUnpackerKilled kills (SIGKILL) a process in the middle of an unpack: the next
// Root unpacks the image whole, and nothing of the dead unpack is left.
func TestUnpackerKilled(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	host, stalled := stallingRegistry(t, release)
	tag := pushTo(t, host+"/big/img:1", bigImage(t, 2000, 4000, "k"))

	dir := reachableDir(t)
	p := startChild(t, dir, tag.String())
	_, err := io.WriteString(p.stdin, "go\n")
	require.NoError(t, err)
	select { // the child is unpacking: it has its temporary root, and waits for the layer's rest
	case <-stalled:
	case <-testctx.Context(t).Done(): // a failure guard, not a measure
		t.Fatal("the child never started unpacking")
	}
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait()
	m, _ := filepath.Glob(filepath.Join(dir, "tmp", "*"))
	require.NotEmpty(t, m, "the killed unpack left its temporary directory")
	open()

	c := newCache(t, images.CacheConfig{Dir: dir})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	r, err := c.Root(ctx, tag.String())
	require.NoError(t, err)
	defer r.Release()
	require.Equal(t, int64(1), c.Stats().Unpacks)
	ents, err := os.ReadDir(filepath.Join(r.Dir, "d9"))
	require.NoError(t, err)
	require.Len(t, ents, 200, "the image is whole")
	nothingLeft(t, c)
}

// pushTo pushes img as ref ("host/repo:tag").
func pushTo(t *testing.T, ref string, img v1.Image) name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img))
	return tag
}
