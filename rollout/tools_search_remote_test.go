package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentic-opd/agenticopd/internal/filesearch"
)

// rootSandbox is a Sandbox over a directory through an os.Root, as the bubblewrap
// sandbox's host-side file tools see it; with search set it is a Searcher that runs
// internal/filesearch over the same root, as the pod helper does.
type rootSandbox struct {
	Sandbox
	root *os.Root
}

func (s rootSandbox) FS() fs.FS { return s.root.FS() }

type searchingSandbox struct{ rootSandbox }

func (s searchingSandbox) SearchFiles(ctx context.Context, q SearchQuery) (SearchResult, error) {
	return SearchResult(filesearch.Search(ctx, s.root.FS(), filesearch.Query(q))), nil
}

// searchTree writes a workspace with what search_files treats specially.
func searchTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(p, content string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.py", "def foo():\n    return 1\n\ndef bar():\n    return foo()\n")
	write("pkg/b.py", "import foo\nfoo.bar()\n")
	write("pkg/sub/c.txt", "foo at the start\nno match\nends with foo\n")
	write("pkg/long.txt", strings.Repeat("x", 9000)+"foo"+strings.Repeat("y", 9000)+"\n")
	write("big.txt", strings.Repeat("foo\n", 300000))
	write("bin.dat", "foo\x00bar\n")
	write(".hidden/h.py", "foo\n")
	write("node_modules/m.js", "foo\n")
	write("crlf.txt", "foo\r\nfoo bar\r\n")
	for i := range 60 {
		write(fmt.Sprintf("many/f%02d.txt", i), "foo\n")
	}
	return dir
}

// The search_files tool writes the same result whether it searched on the host
// through the sandbox's FS or the sandbox searched (Searcher).
func TestSearchSandboxSameAsHost(t *testing.T) {
	dir := searchTree(t)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	host := rootSandbox{root: root}
	remote := searchingSandbox{host}
	tool := searchFilesTool{ToolsConfig{}.withDefaults()}
	for _, args := range []string{
		`{"pattern":"foo"}`,
		`{"pattern":"^foo"}`,
		`{"pattern":"foo$"}`,
		`{"pattern":"f[o]+\\(\\)"}`,
		`{"pattern":"foo","path":"pkg"}`,
		`{"pattern":"foo","glob":"*.py"}`,
		`{"pattern":"foo","glob":"sub/*.txt","path":"pkg"}`,
		`{"pattern":"x+foo"}`,
		`{"pattern":"nothing matches this"}`,
		`{"pattern":"foo","path":"missing"}`,
		`{"pattern":"foo","path":"a.py"}`,
	} {
		want := tool.Call(context.Background(), host, json.RawMessage(args))
		var a struct{ Pattern, Path, Glob string }
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatal(err)
		}
		p := "."
		if a.Path != "" {
			p = a.Path
		}
		got := tool.searchSandbox(context.Background(), remote, a.Pattern, p, a.Glob)
		if got != want {
			t.Errorf("%s:\nhost:    %s\nsandbox: %s", args, want, got)
		}
	}
}

// A search the sandbox stopped at a cap says which, as the host's does.
func TestSearchSandboxCaps(t *testing.T) {
	dir := searchTree(t)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tool := searchFilesTool{ToolsConfig{}.withDefaults()}
	ctx := WithToolBudget(context.Background())
	acct := accountOf(ctx)
	acct.bytes = rolloutMaxFileBytes - 1000 // the rollout has 1000 bytes left to read
	host := tool.Call(ctx, rootSandbox{root: root}, json.RawMessage(`{"pattern":"foo"}`))
	acct.bytes = rolloutMaxFileBytes - 1000
	remote := tool.searchSandbox(ctx, searchingSandbox{rootSandbox{root: root}}, "foo", ".", "")
	if host != remote {
		t.Errorf("host:    %s\nsandbox: %s", host, remote)
	}
	if !strings.Contains(remote, "stopped at the end of the") {
		t.Errorf("the cap is not named: %s", remote)
	}
}
