package podproto_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/filesearch"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// podSandbox is the thin adapter the Kubernetes backend makes: a rollout.Sandbox
// from a Client (here over the local execer).
type podSandbox struct {
	c      *podproto.Client
	mu     sync.Mutex
	closed bool
}

var errClosed = errors.New("closed")

func (s *podSandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *podSandbox) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	if s.isClosed() {
		return rollout.CommandResult{}, errClosed
	}
	res, err := s.c.Run(ctx, cmd)
	if err == nil && s.isClosed() {
		err = errClosed
	}
	return res, err
}

func (s *podSandbox) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	if s.isClosed() {
		return nil, errClosed
	}
	return s.c.Start(ctx, cmd)
}

func (s *podSandbox) ReadFile(name string) ([]byte, error) {
	return s.c.ReadFile(context.Background(), name)
}

func (s *podSandbox) WriteFile(name string, data []byte) error {
	return s.c.WriteFile(context.Background(), name, data)
}

func (s *podSandbox) FS() fs.FS                         { return s.c.FS() }
func (s *podSandbox) Restore(ctx context.Context) error { return s.c.Restore(ctx) }
func (s *podSandbox) SearchFiles(ctx context.Context, q rollout.SearchQuery) (rollout.SearchResult, error) {
	return s.c.SearchFiles(ctx, q)
}

// Close kills every run (the backend deletes the pod instead).
func (s *podSandbox) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	return s.c.Kill(context.Background(), "")
}

func TestConformance(t *testing.T) {
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox {
		c, _, _ := newClient(t, podproto.Config{})
		return &podSandbox{c: c}
	})
}

// The pod's search gives what the same search gives on the host, over the same
// tree; and the search_files tool through a Searcher sandbox gives the same text
// as through the FS alone.
func TestSearchSameAsHost(t *testing.T) {
	c, e, root := newClient(t, podproto.Config{})
	write := func(p, content string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	write("a.py", "def foo():\n    return 1\n")
	write("pkg/b.py", "import foo\nfoo.bar()\n")
	write("pkg/long.txt", strings.Repeat("x", 9000)+"foo"+strings.Repeat("y", 9000)+"\n")
	write("big.txt", strings.Repeat("foo\n", 300000))
	write(".hidden/h.py", "foo\n")
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, "etc_link")))
	r, err := os.OpenRoot(root)
	require.NoError(t, err)
	defer r.Close()
	for _, q := range []rollout.SearchQuery{
		{Pattern: "foo", Path: "."},
		{Pattern: "^foo", Path: "."},
		{Pattern: "foo", Path: "pkg", Glob: "*.py"},
		{Pattern: "root", Path: "etc_link"},
		{Pattern: "foo", Path: "missing"},
		{Pattern: "foo", Path: ".", MaxBytes: 100},
	} {
		if q.MaxBytes == 0 {
			q.MaxBytes = 64 << 20
		}
		q.MaxWork, q.Timeout = 1<<27, time.Minute
		want := rollout.SearchResult(filesearch.Search(context.Background(), r.FS(), filesearch.Query(q)))
		got, err := c.SearchFiles(context.Background(), q)
		require.NoError(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v (-host +pod):\n%s", q, diff)
		}
	}
	sb := &podSandbox{c: c}
	var search rollout.Tool
	for _, tool := range rollout.DefaultTools() {
		if tool.Definition().Function.Name == "search_files" {
			search = tool
		}
	}
	before := e.count(podproto.OpSearch)
	got := search.Call(context.Background(), sb, json.RawMessage(`{"pattern":"foo"}`))
	want := search.Call(context.Background(), &fsOnly{sb}, json.RawMessage(`{"pattern":"foo"}`))
	require.Equal(t, want, got)
	if e.count(podproto.OpSearch) == before {
		t.Log("search_files does not call rollout.Searcher yet (the edit in rollout/tools_builtin.go); it searched through the FS")
	}
}

// fsOnly hides every optional interface of a sandbox.
type fsOnly struct{ rollout.Sandbox }
