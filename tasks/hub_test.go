package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// fakeHub serves the Hub endpoints the loader uses: the Parquet listing of a split
// (/api/datasets/{id}/parquet/{config}/{split}), the listed file URLs, which redirect
// as the Hub's do, and the resolve URLs of refs/convert/parquet.
type fakeHub struct {
	srv *httptest.Server
	// token, when set, is required on every request.
	token string
	// files are the split's Parquet files, keyed by "owner/name/config/split".
	files map[string][][]byte
	// fileBase, when set, replaces the server's own URL in the listing.
	fileBase string
	// listing, when set, is the listing's body.
	listing string
	// redirectBase, when set, is where the listed file URLs redirect to instead of
	// the server itself (the Hub sends downloads to its storage hosts).
	redirectBase string

	mu       sync.Mutex
	requests []string // "METHOD path auth"
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{files: map[string][][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/datasets/{owner}/{name}/parquet/{config}/{split}", func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("owner") + "/" + r.PathValue("name") + "/" + r.PathValue("config") + "/" + r.PathValue("split")
		files, ok := h.files[key]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"Not found"}`)
			return
		}
		if h.listing != "" {
			fmt.Fprint(w, h.listing)
			return
		}
		base := h.srv.URL
		if h.fileBase != "" {
			base = h.fileBase
		}
		var urls []string
		for i := range files {
			urls = append(urls, fmt.Sprintf("%s/api/datasets/%s/parquet/%s/%s/%d.parquet", base,
				r.PathValue("owner")+"/"+r.PathValue("name"), r.PathValue("config"), r.PathValue("split"), i))
		}
		w.Header().Set("Content-Type", "application/json")
		require.NoError(t, json.NewEncoder(w).Encode(urls))
	})
	mux.HandleFunc("GET /api/datasets/{owner}/{name}/parquet/{config}/{split}/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.PathValue("n"), "%d.parquet", &n)
		http.Redirect(w, r, fmt.Sprintf("%s/datasets/%s/%s/resolve/refs%%2Fconvert%%2Fparquet/%s/%s/%04d.parquet",
			h.redirectBase, r.PathValue("owner"), r.PathValue("name"), r.PathValue("config"), r.PathValue("split"), n), http.StatusFound)
	})
	mux.HandleFunc("GET /datasets/{owner}/{name}/resolve/{rev}/{config}/{split}/{file}", func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("owner") + "/" + r.PathValue("name") + "/" + r.PathValue("config") + "/" + r.PathValue("split")
		var n int
		fmt.Sscanf(r.PathValue("file"), "%04d.parquet", &n)
		files := h.files[key]
		if r.PathValue("rev") != "refs/convert/parquet" || n >= len(files) {
			http.NotFound(w, r)
			return
		}
		w.Write(files[n])
	})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		h.mu.Lock()
		h.requests = append(h.requests, r.Method+" "+r.URL.EscapedPath()+" "+auth)
		h.mu.Unlock()
		if h.token != "" && auth != "Bearer "+h.token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"Invalid credentials in Authorization header"}`)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeHub) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

func parquetBytes[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, parquet.Write(&buf, rows))
	return buf.Bytes()
}

type simpleRow struct {
	Prompt   string `parquet:"prompt"`
	TestCode string `parquet:"test_code"`
}

func TestLoadHubDownloadsOnceThenWorksOffline(t *testing.T) {
	hub := newFakeHub(t)
	hub.token = "secret"
	hub.files["acme/coding/default/train"] = [][]byte{
		parquetBytes(t, []simpleRow{{"P1", "T1"}, {"", ""}}),
		parquetBytes(t, []simpleRow{{"P3", "T3"}}),
	}
	cache := t.TempDir()
	cfg := tasks.HubConfig{Dataset: "acme/coding", Token: "secret", CacheDir: cache, BaseURL: hub.srv.URL}
	ctx := context.Background()

	got, report, err := tasks.LoadHub(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, []string{"acme/coding/default/train/0000.parquet:1", "acme/coding/default/train/0001.parquet:1"}, ids(got))
	require.Equal(t, "P3", got[1].Statement)
	require.Equal(t, "T3", got[1].TestCode)
	require.Equal(t, 3, report.Rows)
	require.Equal(t, 1, report.SkippedNoTask)
	require.Len(t, report.Files, 2)
	for _, f := range report.Files {
		require.True(t, strings.HasPrefix(f, cache), "%s is in the cache", f)
	}
	want := []string{
		"GET /api/datasets/acme/coding/parquet/default/train Bearer secret",
		"GET /api/datasets/acme/coding/parquet/default/train/0.parquet Bearer secret",
		"GET /datasets/acme/coding/resolve/refs%2Fconvert%2Fparquet/default/train/0000.parquet Bearer secret",
		"GET /api/datasets/acme/coding/parquet/default/train/1.parquet Bearer secret",
		"GET /datasets/acme/coding/resolve/refs%2Fconvert%2Fparquet/default/train/0001.parquet Bearer secret",
	}
	require.Equal(t, want, hub.log())

	// Second load: from the cache, no request, even with the Hub gone.
	hub.srv.Close()
	for _, offline := range []bool{false, true} {
		cfg.Offline = offline
		again, _, err := tasks.LoadHub(ctx, cfg)
		require.NoError(t, err)
		require.Equal(t, got, again)
	}
	require.Len(t, hub.log(), len(want))
}

func TestLoadHubTokenStaysOnTheHub(t *testing.T) {
	hub := newFakeHub(t)
	cdn := newFakeHub(t) // serves the files on another host
	rows := [][]byte{parquetBytes(t, []simpleRow{{"P", "T"}})}
	hub.files["acme/coding/cfg/test"] = rows
	cdn.files["acme/coding/cfg/test"] = rows
	hub.fileBase = cdn.srv.URL
	got, _, err := tasks.LoadHub(context.Background(), tasks.HubConfig{
		Dataset: "acme/coding", Config: "cfg", Split: "test", Token: "secret",
		CacheDir: t.TempDir(), BaseURL: hub.srv.URL + "/",
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, []string{"GET /api/datasets/acme/coding/parquet/cfg/test Bearer secret"}, hub.log())
	for _, r := range cdn.log() {
		require.True(t, strings.HasSuffix(r, " "), "no token sent to another host: %q", r)
	}
}

func TestLoadHubTokenNotForwardedOnRedirect(t *testing.T) {
	// net/http forwards an Authorization header on a redirect to the same host name
	// (any port) and to subdomains; the loader drops it on every hop that leaves the
	// Hub's address.
	hub := newFakeHub(t)
	storage := newFakeHub(t) // same host name, another port
	rows := [][]byte{parquetBytes(t, []simpleRow{{"P", "T"}}), parquetBytes(t, []simpleRow{{"Q", "U"}})}
	hub.files["acme/coding/default/train"] = rows
	storage.files["acme/coding/default/train"] = rows
	hub.redirectBase = storage.srv.URL
	for _, client := range []*http.Client{nil, {CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}} {
		got, _, err := tasks.LoadHub(context.Background(), tasks.HubConfig{
			Dataset: "acme/coding", Token: "secret", CacheDir: t.TempDir(), BaseURL: hub.srv.URL, HTTPClient: client,
		})
		require.NoError(t, err)
		require.Len(t, got, 2)
	}
	for _, r := range hub.log() {
		require.True(t, strings.HasSuffix(r, " Bearer secret"), "the Hub gets the token: %q", r)
	}
	require.Len(t, storage.log(), 4)
	for _, r := range storage.log() {
		require.True(t, strings.HasSuffix(r, " "), "no token sent after a redirect off the Hub: %q", r)
	}
}

func TestLoadHubCallerRedirectPolicyKept(t *testing.T) {
	hub := newFakeHub(t)
	hub.files["acme/coding/default/train"] = [][]byte{parquetBytes(t, []simpleRow{{"P", "T"}})}
	stop := errors.New("no redirects here")
	_, _, err := tasks.LoadHub(context.Background(), tasks.HubConfig{
		Dataset: "acme/coding", Token: "secret", CacheDir: t.TempDir(), BaseURL: hub.srv.URL,
		HTTPClient: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return stop }},
	})
	require.ErrorIs(t, err, stop)
}

func TestLoadHubErrors(t *testing.T) {
	good := parquetBytes(t, []simpleRow{{"P", "T"}})
	tests := []struct {
		name   string
		setup  func(h *fakeHub)
		cfg    func(h *fakeHub, cache string) tasks.HubConfig
		status int
		want   string
	}{
		{
			name:   "private dataset without a token",
			setup:  func(h *fakeHub) { h.token = "secret"; h.files["acme/x/default/train"] = [][]byte{good} },
			status: http.StatusUnauthorized,
			want:   "401 Unauthorized: Invalid credentials in Authorization header (private or gated datasets need HubConfig.Token",
		},
		{
			name:   "unknown split",
			setup:  func(h *fakeHub) { h.files["acme/x/default/test"] = [][]byte{good} },
			status: http.StatusNotFound,
			want:   "404 Not Found: Not found (check the dataset id, config and split",
		},
		{
			name:  "not Parquet",
			setup: func(h *fakeHub) { h.files["acme/x/default/train"] = [][]byte{[]byte("<html>rate limited</html>")} },
			want:  "not a Parquet file",
		},
		{
			name:  "listing not JSON",
			setup: func(h *fakeHub) { h.files["acme/x/default/train"] = nil; h.listing = "<html>" },
			want:  "want a JSON list of URLs",
		},
		{
			name:  "listing with a file URL of another scheme",
			setup: func(h *fakeHub) { h.files["acme/x/default/train"] = nil; h.listing = `["file:///etc/passwd"]` },
			want:  `refusing to fetch "file:///etc/passwd"`,
		},
		{
			name:  "no files",
			setup: func(h *fakeHub) { h.files["acme/x/default/train"] = [][]byte{} },
			want:  "has no Parquet files",
		},
		{
			name: "malformed row names the cached file",
			setup: func(h *fakeHub) {
				type bad struct {
					Prompt int64 `parquet:"prompt"`
				}
				h.files["acme/x/default/train"] = [][]byte{parquetBytes(t, []bad{{1}})}
			},
			want: `0000.parquet: row 1: column "prompt": want a string`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hub := newFakeHub(t)
			tc.setup(hub)
			cache := t.TempDir()
			cfg := tasks.HubConfig{Dataset: "acme/x", CacheDir: cache, BaseURL: hub.srv.URL}
			_, _, err := tasks.LoadHub(context.Background(), cfg)
			require.ErrorContains(t, err, tc.want)
			if tc.status != 0 {
				var he *tasks.HubError
				require.ErrorAs(t, err, &he)
				require.Equal(t, tc.status, he.Status)
			}
			if tc.name == "malformed row names the cached file" {
				return
			}
			// Nothing half-done was cached: offline there is nothing to load.
			cfg.Offline = true
			_, err = tasks.FetchHub(context.Background(), cfg)
			require.ErrorIs(t, err, tasks.ErrNotCached)
		})
	}
}

func TestFetchHubBadConfig(t *testing.T) {
	cache := t.TempDir()
	tests := []struct {
		name string
		cfg  tasks.HubConfig
		want string
	}{
		{name: "no dataset", cfg: tasks.HubConfig{CacheDir: cache}, want: "Dataset is required"},
		{name: "path escape", cfg: tasks.HubConfig{Dataset: "../etc", CacheDir: cache}, want: "not a dataset id"},
		{name: "too many parts", cfg: tasks.HubConfig{Dataset: "a/b/c", CacheDir: cache}, want: "not a dataset id"},
		{name: "dot-dot in the name", cfg: tasks.HubConfig{Dataset: "a/b..c", CacheDir: cache}, want: "not a dataset id"},
		{name: "bad config", cfg: tasks.HubConfig{Dataset: "a/b", Config: "x/y", CacheDir: cache}, want: "not a valid config name"},
		{name: "bad split", cfg: tasks.HubConfig{Dataset: "a/b", Split: "..", CacheDir: cache}, want: "not a valid split name"},
		{name: "no cache dir", cfg: tasks.HubConfig{Dataset: "a/b"}, want: "CacheDir is required"},
		{name: "offline and not cached", cfg: tasks.HubConfig{Dataset: "a/b", CacheDir: cache, Offline: true}, want: "not complete in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.FetchHub(context.Background(), tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestFetchHubCanceled(t *testing.T) {
	hub := newFakeHub(t)
	hub.files["acme/x/default/train"] = [][]byte{parquetBytes(t, []simpleRow{{"P", "T"}})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tasks.FetchHub(ctx, tasks.HubConfig{Dataset: "acme/x", CacheDir: t.TempDir(), BaseURL: hub.srv.URL})
	require.ErrorIs(t, err, context.Canceled)
}
