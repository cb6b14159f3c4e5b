package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Format is a kind of task source: which loader reads it.
type Format string

// The formats [DetectFormat] tells apart.
const (
	// FormatPrompt is task text and Python tests, one task a row ([LoadJSONL],
	// [LoadParquet], [LoadHub]): a "prompt" or "task" column.
	FormatPrompt Format = "prompt"
	// FormatSWE is repository tasks, SWE-bench's rows and their relatives' (SWE-Gym,
	// SWE-smith, SWE-rebench; [LoadSWE], [LoadSWEHub]): an "instance_id" column with
	// "FAIL_TO_PASS", "test_patch" or "problem_statement".
	FormatSWE Format = "swe"
	// FormatHarbor is a Harbor task directory, or a directory of them
	// ([LoadHarborDir]).
	FormatHarbor Format = "harbor"
)

// ParseFormat reads a format's name ("prompt", "swe", "harbor").
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatPrompt, FormatSWE, FormatHarbor:
		return f, nil
	}
	return "", fmt.Errorf("tasks: unknown format %q (prompt, swe or harbor)", s)
}

// ErrUnknownFormat is wrapped by [DetectFormat]'s error for a source whose columns
// are none of the formats'.
var ErrUnknownFormat = errors.New("tasks: unknown task format")

// FormatOf says which format rows with these columns are in, or false when they are
// in none: repository rows ([FormatSWE]) have "instance_id" and one of
// "FAIL_TO_PASS", "test_patch" or "problem_statement"; other rows with a "prompt" or
// a "task" column are [FormatPrompt]. A source with both reads as SWE rows, whose
// columns are the more specific.
func FormatOf(columns []string) (Format, bool) {
	has := func(c string) bool { return slices.Contains(columns, c) }
	switch {
	case has("instance_id") && (has("FAIL_TO_PASS") || has("test_patch") || has("problem_statement")):
		return FormatSWE, true
	case has(DefaultPromptField) || has(ColumnTask):
		return FormatPrompt, true
	}
	return "", false
}

// DetectFormat says which format the file or directory at path is in: a directory is
// [FormatHarbor] when it, or one of its subdirectories, holds a task.toml; a JSONL
// file (".jsonl", ".json") is judged by the columns of its first row, a Parquet file
// (".parquet") by its schema's, with [FormatOf]'s rules. Only the first row, or the
// footer, is read. A source of no format is an error wrapping [ErrUnknownFormat]
// that names the columns found and the columns each format needs.
func DetectFormat(path string) (Format, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("tasks: %w", err)
	}
	if st.IsDir() {
		if isHarborDir(path) {
			return FormatHarbor, nil
		}
		return "", fmt.Errorf("%w: the directory %s holds no task.toml, nor does any directory in it (a Harbor task has instruction.md, task.toml and tests/)", ErrUnknownFormat, path)
	}
	var cols []string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		cols, err = parquetColumns(path)
	case ".jsonl", ".json":
		cols, err = jsonlColumns(path)
	default:
		return "", fmt.Errorf("%w: %s is not a .jsonl, .json or .parquet file, nor a directory", ErrUnknownFormat, path)
	}
	if err != nil {
		return "", err
	}
	if f, ok := FormatOf(cols); ok {
		return f, nil
	}
	return "", fmt.Errorf("%w: %s has the columns %s: neither task text (%q or %q) nor SWE-bench rows (%q with %q, %q or %q)",
		ErrUnknownFormat, path, quoteAll(cols), DefaultPromptField, ColumnTask, "instance_id", "FAIL_TO_PASS", "test_patch", "problem_statement")
}

func quoteAll(cols []string) string {
	if len(cols) == 0 {
		return "(none)"
	}
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = fmt.Sprintf("%q", c)
	}
	return strings.Join(q, ", ")
}

// jsonlColumns are the keys of the first row of a JSONL file, sorted.
func jsonlColumns(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return nil, &RowError{File: path, Row: line, Reason: err.Error()}
			}
			return nil, fmt.Errorf("tasks: read %s: %w", path, err)
		}
		if line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
		}
		if raw = bytes.TrimSpace(raw); len(raw) > 0 {
			var row map[string]json.RawMessage
			if derr := json.Unmarshal(raw, &row); derr != nil {
				return nil, &RowError{File: path, Row: line, Reason: jsonReason(derr)}
			}
			cols := make([]string, 0, len(row))
			for k := range row {
				cols = append(cols, k)
			}
			slices.Sort(cols)
			return cols, nil
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s has no rows", ErrNoTasks, path)
		}
	}
}

// parquetColumns are the top-level columns of a Parquet file's schema.
func parquetColumns(path string) (cols []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil {
			cols, err = nil, fmt.Errorf("tasks: %s: corrupt Parquet data: %v", path, p)
		}
	}()
	pf, err := openParquet(f, path, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	for _, fld := range pf.Schema().Fields() {
		cols = append(cols, fld.Name())
	}
	return cols, nil
}

// isHarborDir reports whether dir is a Harbor task directory or holds one.
func isHarborDir(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "task.toml")); err == nil {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "task.toml")); e.IsDir() && err == nil {
			return true
		}
	}
	return false
}

// LoadHarborDir reads the Harbor task directory dir ([LoadHarbor]), or, when dir has
// no task.toml of its own, every task directory in it (those with a task.toml, in
// name order; other entries are left alone). The first task that cannot be read is
// the error; a directory without any task is an error wrapping [ErrNoTasks].
func LoadHarborDir(dir string, cfg SWEConfig) ([]Task, error) {
	if _, err := os.Stat(filepath.Join(dir, "task.toml")); err == nil {
		t, err := LoadHarbor(dir, cfg)
		if err != nil {
			return nil, err
		}
		return []Task{t}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	var ts []Task
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "task.toml")); !e.IsDir() || err != nil {
			continue
		}
		t, err := LoadHarbor(sub, cfg)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: %s holds no Harbor task directory (one with task.toml)", ErrNoTasks, dir)
	}
	return ts, nil
}

// LoadRepoSpecs reads a specification table from a JSON file: an object by
// "owner/repo", each entry {"test_cmd": "…", "log_parser": "…",
// "append_test_files": true|false}, and returns [RepoSpecs] with those entries added
// or replaced, ready for [SWEConfig.Specs]. An entry without a test command, with an
// unknown log parser or an unknown key is an error that names the file and the
// repository.
func LoadRepoSpecs(path string) (map[string]RepoSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("tasks: %s: want a JSON object by \"owner/repo\": %s", path, jsonReason(err))
	}
	specs := RepoSpecs()
	for _, repo := range slices.Sorted(func(yield func(string) bool) {
		for k := range entries {
			if !yield(k) {
				return
			}
		}
	}) {
		var e struct {
			TestCmd         string `json:"test_cmd"`
			LogParser       string `json:"log_parser"`
			AppendTestFiles bool   `json:"append_test_files"`
		}
		dec := json.NewDecoder(bytes.NewReader(entries[repo]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tasks: %s: %q: %s (keys: test_cmd, log_parser, append_test_files)", path, repo,
				strings.TrimPrefix(jsonReason(err), "json: "))
		}
		switch {
		case strings.TrimSpace(e.TestCmd) == "":
			return nil, fmt.Errorf("tasks: %s: %q has no test_cmd", path, repo)
		case !knownParser(e.LogParser):
			return nil, fmt.Errorf("tasks: %s: %q: unknown log_parser %q (known: %s, %s, %s, %s, %s)", path, repo, e.LogParser,
				ParserPytest, ParserDjango, ParserSympy, ParserGoTest, ParserCargo)
		}
		specs[repo] = RepoSpec{TestCommand: e.TestCmd, LogParser: e.LogParser, AppendTestFiles: e.AppendTestFiles}
	}
	return specs, nil
}
