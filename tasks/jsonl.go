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
)

// maxLineBytes bounds one JSONL line.
const maxLineBytes = 64 << 20

// LoadJSONL reads tasks from a JSONL file: one JSON object per line, with the column
// rules of the package doc. Blank lines are ignored. A line that is not a JSON object, or
// a column of the wrong type, is a [*RowError] naming the file, the line and the column;
// a missing file is an error wrapping [io/fs.ErrNotExist] that names the file. A file
// with no task is an error wrapping [ErrNoTasks], one with no task that has tests an
// error wrapping [ErrNoTests] (see [LoadConfig.AllowNoTests]); both name the file.
func LoadJSONL(path string, cfg LoadConfig) ([]Task, LoadReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, LoadReport{}, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	return readJSONL(f, path, filepath.Base(path), cfg)
}

// ReadJSONL reads tasks in JSONL form from r, as [LoadJSONL] does; name stands for the
// file in errors and generated ids.
func ReadJSONL(r io.Reader, name string, cfg LoadConfig) ([]Task, LoadReport, error) {
	return readJSONL(r, name, name, cfg)
}

func readJSONL(r io.Reader, file, source string, cfg LoadConfig) ([]Task, LoadReport, error) {
	rr := &rowReader{file: file, source: source, cfg: cfg}
	rr.report.Files = []string{file}
	cols := rr.columns()
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Task
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return nil, rr.report, &RowError{File: file, Row: line, Reason: err.Error()}
			}
			return nil, rr.report, fmt.Errorf("tasks: read %s: %w", file, err)
		}
		if line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 {
			cells, perr := parseJSONRow(trimmed, cols)
			if perr != nil {
				perr.File, perr.Row = file, line
				return nil, rr.report, perr
			}
			t, ok, aerr := rr.add(line, cells)
			if aerr != nil {
				return nil, rr.report, aerr
			}
			if ok {
				out = append(out, t)
			}
		}
		if errors.Is(err, io.EOF) {
			if err := rr.report.check(file, cfg); err != nil {
				return nil, rr.report, err
			}
			return out, rr.report, nil
		}
	}
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLineBytes)

// readLine returns the next line without its newline; io.EOF comes with the last line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLineBytes {
			return nil, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// parseJSONRow decodes one JSON object and converts the wanted columns. The returned
// error has Column and Reason set; the caller fills in File and Row.
func parseJSONRow(data []byte, cols []string) (map[string]cell, *RowError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, &RowError{Reason: "not a JSON object: " + jsonReason(err)}
	}
	if obj == nil {
		return nil, &RowError{Reason: "not a JSON object: null"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &RowError{Reason: "text after the JSON object"}
	}
	cells := make(map[string]cell, len(cols))
	for _, col := range cols {
		raw, ok := obj[col]
		if !ok {
			continue
		}
		c, err := jsonCell(raw)
		if err != nil {
			return nil, &RowError{Column: col, Reason: err.Error()}
		}
		cells[col] = c
	}
	return cells, nil
}

func jsonCell(raw json.RawMessage) (cell, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return cell{}, errors.New("empty value")
	}
	switch raw[0] {
	case 'n':
		return cell{null: true, kind: "null"}, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return cell{}, errors.New("bad string: " + jsonReason(err))
		}
		return cell{text: s, isText: true, kind: "string"}, nil
	case 't', 'f':
		return cell{kind: "boolean"}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return cell{}, errors.New("bad array: " + jsonReason(err))
		}
		list := make([]string, len(items))
		for i, item := range items {
			if item = bytes.TrimSpace(item); len(item) == 0 || item[0] != '"' {
				return cell{kind: "an array with a non-string element"}, nil
			}
			if err := json.Unmarshal(item, &list[i]); err != nil {
				return cell{}, errors.New("bad string: " + jsonReason(err))
			}
		}
		return cell{kind: "array", list: list, isList: true}, nil
	case '{':
		return cell{kind: "object"}, nil
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return cell{}, errors.New("bad value: " + jsonReason(err))
		}
		if i, err := n.Int64(); err == nil {
			return cell{integer: i, isInt: true, kind: "integer"}, nil
		}
		return cell{kind: "number"}, nil
	}
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}
