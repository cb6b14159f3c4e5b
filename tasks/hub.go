package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultHubURL is the Hugging Face Hub.
const DefaultHubURL = "https://huggingface.co"

// ErrNotCached is wrapped by the error [FetchHub] returns in offline mode when the
// dataset is not in the cache.
var ErrNotCached = errors.New("tasks: dataset not in the cache")

// HubConfig says which Hugging Face Hub dataset to load and where to keep it.
type HubConfig struct {
	// Dataset is the dataset id, "owner/name" or a legacy name without owner
	// (required).
	Dataset string
	// Config is the dataset configuration (subset); "" means "default".
	Config string
	// Split is the split to read; "" means "train".
	Split string
	// Token is a Hub access token for private or gated datasets, sent as
	// "Authorization: Bearer <token>" only on requests to BaseURL's scheme and host
	// (port included), never after a redirect elsewhere (the Hub redirects file
	// downloads to its storage hosts); "" sends none. It is never read from the
	// environment.
	Token string
	// CacheDir is the directory the Parquet files are kept in (required). A dataset
	// found there complete is used without any request.
	CacheDir string
	// BaseURL is the Hub's address; "" means DefaultHubURL.
	BaseURL string
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Offline forbids requests: the dataset must be in the cache.
	Offline bool
	// Load configures the column rules.
	Load LoadConfig
	// Logger, when set, records downloads.
	Logger *slog.Logger
}

// HubError is a failed Hub request.
type HubError struct {
	// URL is the request's address.
	URL string
	// Status is the HTTP status code.
	Status int
	// Message is the Hub's error message, or the start of the body.
	Message string
}

// Error implements error.
func (e *HubError) Error() string {
	msg := fmt.Sprintf("tasks: hub: GET %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (private or gated datasets need HubConfig.Token, with access granted on the Hub)"
	case http.StatusNotFound:
		msg += " (check the dataset id, config and split; a private dataset also answers 404 without a token)"
	}
	return msg
}

// LoadHub loads a split of a Hugging Face Hub dataset through its Parquet files (see
// [FetchHub]) with the column rules of the package doc. A split with no task, or with
// no task that has tests, is an error that names the dataset (hf:ID), as [LoadJSONL]'s.
func LoadHub(ctx context.Context, cfg HubConfig) ([]Task, LoadReport, error) {
	paths, err := FetchHub(ctx, cfg)
	if err != nil {
		return nil, LoadReport{}, err
	}
	ds, _ := cfg.names()
	var (
		out    []Task
		report LoadReport
	)
	for _, p := range paths {
		ts, r, err := loadParquet(p, ds.source(filepath.Base(p)), cfg.Load)
		report.add(r)
		if err != nil {
			return nil, report, err
		}
		out = append(out, ts...)
	}
	if err := report.check("hf:"+cfg.Dataset, cfg.Load); err != nil {
		return nil, report, err
	}
	return out, report, nil
}

// FetchHub makes sure a split's Parquet files are in cfg.CacheDir and returns their
// paths, in the Hub's order. On a cache miss it asks the Hub for the split's files
// (GET {BaseURL}/api/datasets/{id}/parquet/{config}/{split}, which answers with a JSON
// list of file URLs), downloads each file once into the cache (written to a temporary
// name, checked to be Parquet, then renamed into place), and writes a manifest last, so
// an interrupted download is never taken for a complete one. Later calls, online or
// offline, use the cache without any request; delete the directory to refresh it.
func FetchHub(ctx context.Context, cfg HubConfig) ([]string, error) {
	ds, err := cfg.names()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.CacheDir, "datasets", filepath.FromSlash(ds.id), ds.config, ds.split)
	if paths, ok := readManifest(dir); ok {
		return paths, nil
	}
	if cfg.Offline {
		return nil, fmt.Errorf("%w: %s (config %q, split %q) is not complete in %s; fetch it once online", ErrNotCached, ds.id, ds.config, ds.split, dir)
	}
	h := hubClient{cfg: cfg, base: cfg.baseURL()}
	urls, err := h.listParquet(ctx, ds)
	if err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("tasks: hub: %s (config %q, split %q) has no Parquet files", ds.id, ds.config, ds.split)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tasks: hub cache: %w", err)
	}
	var m manifest
	for i, u := range urls {
		name := fmt.Sprintf("%04d.parquet", i)
		if err := h.download(ctx, u, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		m.Files = append(m.Files, manifestFile{Name: name, URL: u})
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, err
	}
	paths, _ := readManifest(dir)
	return paths, nil
}

type dataset struct{ id, config, split string }

func (d dataset) source(file string) string {
	return d.id + "/" + d.config + "/" + d.split + "/" + file
}

var (
	datasetIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)
	namePattern      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

func (c HubConfig) names() (dataset, error) {
	d := dataset{id: c.Dataset, config: c.Config, split: c.Split}
	if d.config == "" {
		d.config = "default"
	}
	if d.split == "" {
		d.split = "train"
	}
	switch {
	case d.id == "":
		return d, errors.New("tasks: HubConfig.Dataset is required")
	case !datasetIDPattern.MatchString(d.id) || strings.Contains(d.id, ".."):
		return d, fmt.Errorf("tasks: HubConfig.Dataset %q is not a dataset id like \"owner/name\"", d.id)
	case !namePattern.MatchString(d.config) || strings.Contains(d.config, ".."):
		return d, fmt.Errorf("tasks: HubConfig.Config %q is not a valid config name", d.config)
	case !namePattern.MatchString(d.split) || strings.Contains(d.split, ".."):
		return d, fmt.Errorf("tasks: HubConfig.Split %q is not a valid split name", d.split)
	case c.CacheDir == "":
		return d, errors.New("tasks: HubConfig.CacheDir is required")
	}
	return d, nil
}

func (c HubConfig) baseURL() string {
	if c.BaseURL == "" {
		return DefaultHubURL
	}
	return strings.TrimRight(c.BaseURL, "/")
}

type hubClient struct {
	cfg  HubConfig
	base string
}

// maxRedirects is how many redirects a request follows when the caller's client has no
// redirect policy of its own (net/http's default).
const maxRedirects = 10

// client returns the HTTP client. With a token, it is a copy of the caller's client
// whose redirect policy drops the token on every hop that leaves the Hub: net/http alone
// would forward it to the same host name on another port and to every subdomain.
func (h hubClient) client() *http.Client {
	c := h.cfg.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	if h.cfg.Token == "" {
		return c
	}
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !h.onHub(req.URL) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &cc
}

// onHub reports whether u has the scheme and host (with port) of the Hub's address:
// only such requests carry the token.
func (h hubClient) onHub(u *url.URL) bool {
	base, err := url.Parse(h.base)
	return err == nil && base.Scheme == u.Scheme && strings.EqualFold(base.Host, u.Host)
}

// get sends a GET, with the token when the URL is on the Hub (see onHub).
func (h hubClient) get(ctx context.Context, rawURL string) (*http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tasks: hub: refusing to fetch %q: not an http(s) URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("tasks: hub: %w", err)
	}
	if h.cfg.Token != "" && h.onHub(u) {
		req.Header.Set("Authorization", "Bearer "+h.cfg.Token)
	}
	resp, err := h.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("tasks: hub: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, &HubError{URL: rawURL, Status: resp.StatusCode, Message: hubMessage(body)}
	}
	return resp, nil
}

func hubMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (h hubClient) listParquet(ctx context.Context, d dataset) ([]string, error) {
	var segs []string
	for _, s := range strings.Split(d.id, "/") {
		segs = append(segs, url.PathEscape(s))
	}
	u := h.base + "/api/datasets/" + strings.Join(segs, "/") + "/parquet/" + url.PathEscape(d.config) + "/" + url.PathEscape(d.split)
	resp, err := h.get(ctx, u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var urls []string
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&urls); err != nil {
		return nil, fmt.Errorf("tasks: hub: GET %s: want a JSON list of URLs: %w", u, err)
	}
	return urls, nil
}

var parquetMagic = []byte("PAR1")

func (h hubClient) download(ctx context.Context, rawURL, dst string) error {
	resp, err := h.get(ctx, rawURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".download-*")
	if err != nil {
		return fmt.Errorf("tasks: hub cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	n, err := io.Copy(tmp, resp.Body)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = checkParquet(tmp, n)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tasks: hub: download %s: %w", rawURL, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("tasks: hub cache: %w", err)
	}
	if h.cfg.Logger != nil {
		h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "tasks: downloaded dataset file",
			slog.String("url", rawURL), slog.String("path", dst), slog.Int64("bytes", n))
	}
	return nil
}

func checkParquet(f *os.File, size int64) error {
	head := make([]byte, 4)
	tail := make([]byte, 4)
	if size < 12 {
		return errors.New("not a Parquet file (too short)")
	}
	if _, err := f.ReadAt(head, 0); err != nil {
		return err
	}
	if _, err := f.ReadAt(tail, size-4); err != nil {
		return err
	}
	if !bytes.Equal(head, parquetMagic) || !bytes.Equal(tail, parquetMagic) {
		return errors.New("not a Parquet file (no PAR1 magic)")
	}
	return nil
}

const manifestName = "manifest.json"

type manifest struct {
	Files []manifestFile `json:"files"`
}

type manifestFile struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// readManifest returns the cached files when the manifest and every file it lists exist.
func readManifest(dir string) ([]string, bool) {
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, false
	}
	var m manifest
	if json.Unmarshal(data, &m) != nil || len(m.Files) == 0 {
		return nil, false
	}
	paths := make([]string, 0, len(m.Files))
	for _, f := range m.Files {
		if !namePattern.MatchString(f.Name) {
			return nil, false
		}
		p := filepath.Join(dir, f.Name)
		if _, err := os.Stat(p); err != nil {
			return nil, false
		}
		paths = append(paths, p)
	}
	return paths, true
}

func writeManifest(dir string, m manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("tasks: hub cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".manifest-*")
	if err != nil {
		return fmt.Errorf("tasks: hub cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, manifestName))
	}
	if err != nil {
		return fmt.Errorf("tasks: hub cache: %w", err)
	}
	return nil
}
