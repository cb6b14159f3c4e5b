package tasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultImagePrefix is put before an image name that has no registry or namespace,
// and before the names SWE-bench's convention builds for rows without an image; never
// before a reference to an image on the local disk ("oci-layout:…", "docker-archive:…").
// It is SWE-bench's namespace on Docker Hub, with no registry written: package images
// pulls a reference without a registry from Docker Hub, as docker does
// (go-containerregistry's name.DefaultRegistry). Set [SWEConfig.ImagePrefix] to take
// the same names from a mirror.
const DefaultImagePrefix = "swebench/"

// SWEConfig configures the repository-task loaders ([LoadSWE], [ReadSWEJSONL],
// [LoadSWEHub]). The zero value reads SWE-bench, SWE-Gym, SWE-smith and SWE-rebench rows
// with [RepoSpecs].
type SWEConfig struct {
	// Specs is the specification table by "owner/repo"; nil means [RepoSpecs]. A row
	// that gives its own test command and parser (SWE-rebench's install_config, v5's
	// log_parser with a test_cmd) needs no entry.
	Specs map[string]RepoSpec
	// ImagePrefix is put before image names without a registry or namespace; ""
	// means [DefaultImagePrefix]. It is never put before a reference to an image on
	// the local disk ("oci-layout:…", "docker-archive:…").
	ImagePrefix string
	// WorkDir overrides the repository directory of every task; "" keeps the row's
	// ("/<repo name>" for SWE-rebench V2 rows with an install_config, else
	// [DefaultWorkDir]).
	WorkDir string
	// TestTimeout is every task's test timeout; 0 leaves the grader's default.
	TestTimeout time.Duration
}

// SWERow is one row of a SWE-bench-style dataset, with the columns of SWE-bench,
// SWE-Gym, SWE-smith and SWE-rebench (see the package doc). FAIL_TO_PASS and
// PASS_TO_PASS decode from either encoding ([TestList]).
type SWERow struct {
	InstanceID       string   `json:"instance_id"`
	Repo             string   `json:"repo"`
	BaseCommit       string   `json:"base_commit"`
	Patch            string   `json:"patch"`
	TestPatch        string   `json:"test_patch"`
	ProblemStatement string   `json:"problem_statement"`
	Version          flexText `json:"version"`
	FailToPass       TestList `json:"FAIL_TO_PASS"`
	PassToPass       TestList `json:"PASS_TO_PASS"`
	// Image is SWE-bench v5's full image reference; ImageName SWE-smith's and
	// SWE-rebench V2's name; DockerImage R2E-Gym's.
	Image       string `json:"image"`
	ImageName   string `json:"image_name"`
	DockerImage string `json:"docker_image"`
	// TestCmd and LogParser, when given (v5 rows, or inside InstallConfig), replace
	// the specification table's. TestCmd runs as written: no test file is appended.
	TestCmd       flexCommand    `json:"test_cmd"`
	LogParser     string         `json:"log_parser"`
	InstallConfig *installConfig `json:"install_config"`
}

// installConfig is SWE-rebench's per-instance specification; in JSONL an object or a
// JSON string holding one.
type installConfig struct {
	TestCmd   flexCommand `json:"test_cmd"`
	LogParser string      `json:"log_parser"`
}

func (c *installConfig) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			return nil
		}
		data = []byte(s)
	}
	type plain installConfig
	return json.Unmarshal(data, (*plain)(c))
}

// flexText is a string that may come as a JSON number ("version": 3.0).
type flexText string

func (t *flexText) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*t = flexText(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(data, &n); err != nil {
		return errors.New("want a string or a number")
	}
	*t = flexText(n.String())
	return nil
}

// flexCommand is a command given as a string or as a list of commands (run in turn).
type flexCommand string

func (c *flexCommand) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*c = flexCommand(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New("want a command string or a list of them")
	}
	*c = flexCommand(strings.Join(list, " ; "))
	return nil
}

// sweColumns are the columns the Parquet reader converts.
var sweColumns = []string{"instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
	"version", "FAIL_TO_PASS", "PASS_TO_PASS", "image", "image_name", "docker_image", "test_cmd", "log_parser",
	"install_config"}

// Task turns the row into a repository task with cfg, or says what is missing: the
// row's fields, or, for a repository without a test command and parser of its own, an
// entry in the specification table (an error wrapping [ErrUnknownRepo]).
func (r SWERow) Task(cfg SWEConfig) (Task, error) {
	switch {
	case r.InstanceID == "":
		return Task{}, errors.New(`no "instance_id"`)
	case r.ProblemStatement == "":
		return Task{}, errors.New(`no "problem_statement"`)
	case len(r.FailToPass) == 0:
		return Task{}, errors.New(`empty "FAIL_TO_PASS": a task needs at least one test that the fix makes pass`)
	}
	smith := r.TestPatch == "" && r.ImageName != "" && r.Patch != ""
	if r.TestPatch == "" && !smith {
		return Task{}, errors.New(`no "test_patch" (and not a SWE-smith row: those have "image_name" and a bug "patch")`)
	}
	repo := &Repo{
		Name: r.Repo, Version: string(r.Version), BaseCommit: r.BaseCommit, TestPatch: r.TestPatch,
		GoldPatch: r.Patch, FailToPass: r.FailToPass, PassToPass: r.PassToPass,
		TestCommand: string(r.TestCmd), LogParser: r.LogParser, TestTimeout: cfg.TestTimeout,
	}
	if r.InstallConfig != nil {
		repo.TestCommand = cmp(repo.TestCommand, string(r.InstallConfig.TestCmd))
		repo.LogParser = cmp(repo.LogParser, r.InstallConfig.LogParser)
		if r.ImageName != "" && r.Repo != "" {
			repo.WorkDir = "/" + path.Base(r.Repo)
		}
	}
	if smith {
		// SWE-smith: the image holds the clean snapshot; the row's patch brings the
		// bug, the FAIL_TO_PASS test files are hidden until grading.
		repo.Setup, repo.GoldReversed, repo.TestPatch = r.Patch, true, ""
		for _, id := range r.FailToPass {
			if f, _, ok := strings.Cut(id, "::"); ok && !slices.Contains(repo.HiddenFiles, f) {
				repo.HiddenFiles = append(repo.HiddenFiles, f)
			}
		}
	}
	repo.Image = cfg.image(r, smith)
	if repo.Image == "" {
		return Task{}, errors.New(`no image: give "image" or "image_name"`)
	}
	if cfg.WorkDir != "" {
		repo.WorkDir = cfg.WorkDir
	}
	if repo.TestCommand == "" || repo.LogParser == "" {
		specs := cfg.Specs
		if specs == nil {
			specs = RepoSpecs()
		}
		spec, ok := specs[r.Repo]
		if !ok {
			return Task{}, fmt.Errorf("%w: repository %q: add it to SWEConfig.Specs (a RepoSpec with its test command "+
				"and log parser, e.g. %q and %q), or give the row \"test_cmd\" and \"log_parser\"",
				ErrUnknownRepo, r.Repo, "pytest -rA -p no:cacheprovider", ParserPytest)
		}
		if smith {
			spec.AppendTestFiles = false
			cmd := spec.TestCommand
			for _, f := range repo.HiddenFiles {
				cmd += " " + shellQuote(f)
			}
			spec.TestCommand = cmd
		}
		repo.TestCommand = cmp(repo.TestCommand, spec.Command(r.Repo, r.TestPatch))
		repo.LogParser = cmp(repo.LogParser, spec.LogParser)
	}
	if !knownParser(repo.LogParser) {
		return Task{}, fmt.Errorf("unknown log parser %q (known: %s, %s, %s, %s, %s)", repo.LogParser,
			ParserPytest, ParserDjango, ParserSympy, ParserGoTest, ParserCargo)
	}
	return Task{
		ID: r.InstanceID, Statement: r.ProblemStatement, Difficulty: DifficultyUnknown,
		Language: LanguagePython, Repo: repo,
	}, nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// knownParser reports whether name is a parser reward.ParseTestLog implements.
// Parser names of the SWE-bench harness map onto them (parse_log_pytest_v2 and the
// other pytest variants read as pytest).
func knownParser(name string) bool {
	switch canonicalParser(name) {
	case ParserPytest, ParserDjango, ParserSympy, ParserGoTest, ParserCargo:
		return true
	}
	return false
}

// CanonicalParser maps a dataset's log parser name ("parse_log_pytest_v2", "pytest",
// "django", …) onto the parsers of this package's Parser constants; "" when it is none.
func CanonicalParser(name string) string {
	if c := canonicalParser(name); knownParser(c) {
		return c
	}
	return ""
}

func canonicalParser(name string) string {
	n := strings.ToLower(strings.TrimPrefix(strings.ToLower(name), "parse_log_"))
	switch {
	case strings.HasPrefix(n, "pytest"), n == "matplotlib", n == "seaborn", n == "astropy", n == "sklearn",
		// The SWE-bench harness's per-repository names of its pytest parsers.
		n == "astroid", n == "flask", n == "marshmallow", n == "pvlib", n == "pyvista", n == "sqlfluff",
		n == "xarray", n == "pydicom", n == "requests", n == "pylint", n == "scikit", n == "sphinx":
		return ParserPytest
	case n == "django":
		return ParserDjango
	case n == "sympy":
		return ParserSympy
	case n == "gotest", n == "go_test", n == "go":
		return ParserGoTest
	case n == "cargo", n == "rust":
		return ParserCargo
	}
	return n
}

// isLocalImage reports a reference to an image on the local disk, as package images
// reads them ("oci-layout:DIR[:tag|@digest]", "docker-archive:FILE[:repo:tag]"). Such
// a reference names a path, not a repository: it is never prefixed or rewritten.
func isLocalImage(ref string) bool {
	return strings.HasPrefix(ref, "oci-layout:") || strings.HasPrefix(ref, "docker-archive:")
}

// image is the row's image reference: its own, else SWE-bench's convention. A
// reference to an image on the local disk is kept as written (a relative path is
// relative to the working directory of the process that opens the image); a
// registry reference with a registry or a namespace (any "/") too; a bare name gets
// the prefix, after SWE-smith's "__" became "_1776_" as on Docker Hub.
func (c SWEConfig) image(r SWERow, smith bool) string {
	prefix := cmp(c.ImagePrefix, DefaultImagePrefix)
	name := cmp(cmp(r.Image, r.ImageName), r.DockerImage)
	if name == "" {
		if r.InstanceID == "" {
			return ""
		}
		id := strings.ReplaceAll(strings.ToLower(r.InstanceID), "__", "_1776_")
		return prefix + "sweb.eval.x86_64." + id + ":latest"
	}
	if isLocalImage(name) {
		return name
	}
	if smith {
		name = strings.ReplaceAll(name, "__", "_1776_")
	}
	if strings.Contains(name, "/") {
		return name
	}
	return prefix + name
}

// LoadSWE reads repository tasks from a SWE-bench-style file: JSONL (".jsonl", ".json")
// or Parquet (".parquet"). Each row becomes a task by [SWERow.Task]; a row that cannot
// is a [*RowError] naming the file, the row and the reason (an unknown repository's
// also wraps [ErrUnknownRepo]). A file without rows is an error wrapping [ErrNoTasks].
func LoadSWE(file string, cfg SWEConfig) ([]Task, error) {
	if strings.EqualFold(filepath.Ext(file), ".parquet") {
		return loadSWEParquet(file, cfg)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	return ReadSWEJSONL(f, file, cfg)
}

// ReadSWEJSONL reads repository tasks from JSONL, as [LoadSWE] does; name stands for
// the file in errors.
func ReadSWEJSONL(r io.Reader, name string, cfg SWEConfig) ([]Task, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Task
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return nil, &RowError{File: name, Row: line, Reason: err.Error()}
			}
			return nil, fmt.Errorf("tasks: read %s: %w", name, err)
		}
		if raw = bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))); len(raw) > 0 {
			var row SWERow
			if derr := json.Unmarshal(raw, &row); derr != nil {
				return nil, &RowError{File: name, Row: line, Reason: jsonReason(derr)}
			}
			t, terr := row.Task(cfg)
			if terr != nil {
				return nil, &rowCause{RowError{File: name, Row: line, Reason: terr.Error()}, terr}
			}
			out = append(out, t)
		}
		if errors.Is(err, io.EOF) {
			if len(out) == 0 {
				return nil, fmt.Errorf("%w: %s has no rows", ErrNoTasks, name)
			}
			return out, nil
		}
	}
}

// rowCause is a RowError that also wraps its cause (ErrUnknownRepo).
type rowCause struct {
	RowError
	cause error
}

func (e *rowCause) Unwrap() []error { return []error{ErrMalformed, e.cause} }

// LoadSWEHub reads repository tasks from a split of a Hugging Face Hub dataset
// (SWE-bench/SWE-bench_Verified, SWE-Gym/SWE-Gym, …), fetched and cached as
// [FetchHub] does (hub.Load is not used), each row by [SWERow.Task].
func LoadSWEHub(ctx context.Context, hub HubConfig, cfg SWEConfig) ([]Task, error) {
	paths, err := FetchHub(ctx, hub)
	if err != nil {
		return nil, err
	}
	var out []Task
	for _, p := range paths {
		ts, err := loadSWEParquet(p, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func loadSWEParquet(file string, cfg SWEConfig) (out []Task, err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("tasks: %s: corrupt Parquet data: %v", file, p)
		}
	}()
	pf, err := openParquet(f, file)
	if err != nil {
		return nil, err
	}
	err = parquetRows(pf, file, sweColumns, func(row int, cells map[string]cell) error {
		obj := make(map[string]any, len(cells))
		for col, c := range cells {
			switch {
			case c.null:
			case c.isText:
				obj[col] = c.text
			case c.isList:
				obj[col] = c.list
			case c.isInt:
				obj[col] = c.integer
			default:
				return &RowError{File: file, Row: row, Column: col,
					Reason: "want a string or a list of strings, have " + c.kind + " (give install_config as a JSON string)"}
			}
		}
		raw, _ := json.Marshal(obj)
		var r SWERow
		if err := json.Unmarshal(raw, &r); err != nil {
			return &RowError{File: file, Row: row, Reason: err.Error()}
		}
		t, err := r.Task(cfg)
		if err != nil {
			return &rowCause{RowError{File: file, Row: row, Reason: err.Error()}, err}
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no rows", ErrNoTasks, file)
	}
	return out, nil
}
