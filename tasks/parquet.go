package tasks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
)

// LoadParquet reads tasks from a Parquet file, one task per row, with the column rules
// of the package doc. Text columns must be byte-array (string) columns and "id" a string
// or integer column; a value of another type is a [*RowError] naming the file, the
// first row holding such a value and the column (a column of the wrong type that is null
// in every row is treated as absent). A missing file is an error wrapping
// [io/fs.ErrNotExist] that names the file; a file that is not Parquet is an error naming it.
//
// As with [LoadJSONL], a file with no task, or with no task that has tests, is an
// error that names it.
func LoadParquet(path string, cfg LoadConfig) ([]Task, LoadReport, error) {
	ts, report, err := loadParquet(path, filepath.Base(path), cfg)
	if err == nil {
		err = report.check(path, cfg)
	}
	if err != nil {
		return nil, report, err
	}
	return ts, report, nil
}

func loadParquet(path, source string, cfg LoadConfig) (ts []Task, report LoadReport, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, LoadReport{}, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	rr := &rowReader{file: path, source: source, cfg: cfg}
	rr.report.Files = []string{path}
	defer func() {
		// parquet-go may panic on corrupt data; a bad file must not crash the caller.
		if p := recover(); p != nil {
			ts, report, err = nil, rr.report, fmt.Errorf("tasks: %s: corrupt Parquet data: %v", path, p)
		}
	}()
	pf, err := openParquet(f, path)
	if err != nil {
		return nil, rr.report, err
	}
	ts, err = readParquetRows(pf, rr)
	return ts, rr.report, err
}

// openParquet opens f, the Parquet file at path, once its footer passed checkFooter.
// parquet-go may panic on corrupt data: the caller recovers.
func openParquet(f *os.File, path string, opts ...parquet.FileOption) (*parquet.File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	if err := checkFooter(f, st.Size()); err != nil {
		return nil, fmt.Errorf("tasks: %s: not a readable Parquet file: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tasks: %s: not a readable Parquet file: %w", path, err)
	}
	return pf, nil
}

// checkFooter checks the magic numbers and the footer length before parquet-go reads
// the file: a corrupt length would make it allocate up to 4 GiB.
func checkFooter(f *os.File, size int64) error {
	if size < 12 {
		return errors.New("too short")
	}
	var head, tail [8]byte
	if _, err := f.ReadAt(head[:4], 0); err != nil {
		return err
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return errors.New("no PAR1 magic (encrypted files are not supported)")
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("footer length %d exceeds the file size %d", n, size)
	}
	return nil
}

// parquetColumn is a wanted column's place in the file.
type parquetColumn struct {
	name   string
	leaves map[int]bool // column indexes of the field's leaves
	leaf   bool
	kind   parquet.Kind
	desc   string // the type, for errors
	// strings is set for a list of strings: a LIST of byte arrays (one leaf) or a
	// repeated byte-array column.
	strings bool
}

func (c parquetColumn) cell(row parquet.Row) cell {
	var vals []parquet.Value
	nulls := 0
	for _, v := range row {
		if !c.leaves[v.Column()] {
			continue
		}
		if v.IsNull() {
			nulls++
			continue
		}
		vals = append(vals, v)
	}
	if c.strings {
		switch {
		case len(vals) == 0:
			return cell{null: true, kind: "null"}
		case nulls > 0:
			return cell{kind: "a list with a null element"}
		}
		list := make([]string, len(vals))
		for i, v := range vals {
			list[i] = string(v.ByteArray())
		}
		return cell{list: list, isList: true, kind: c.desc}
	}
	if len(vals) == 0 {
		return cell{null: true, kind: "null"}
	}
	if !c.leaf {
		return cell{kind: c.desc}
	}
	v := vals[0]
	switch c.kind {
	case parquet.ByteArray:
		return cell{text: string(v.ByteArray()), isText: true, kind: c.desc}
	case parquet.Int32, parquet.Int64:
		return cell{integer: v.Int64(), isInt: true, kind: c.desc}
	default:
		return cell{kind: c.desc}
	}
}

func readParquetRows(pf *parquet.File, rr *rowReader) ([]Task, error) {
	var out []Task
	err := parquetRows(pf, rr.file, rr.columns(), func(row int, cells map[string]cell) error {
		t, ok, err := rr.add(row, cells)
		if ok {
			out = append(out, t)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parquetRows calls fn with the wanted columns of each row of pf, rows counted from 1;
// file names pf in errors. It stops at fn's first error.
func parquetRows(pf *parquet.File, file string, wanted []string, fn func(row int, cells map[string]cell) error) error {
	schema := pf.Schema()
	paths := schema.Columns()
	var cols []parquetColumn
	for _, name := range wanted {
		for _, field := range schema.Fields() {
			if field.Name() != name {
				continue
			}
			c := parquetColumn{name: name, leaves: map[int]bool{}, leaf: field.Leaf()}
			for i, p := range paths {
				if len(p) > 0 && p[0] == name {
					c.leaves[i] = true
				}
			}
			c.strings = len(c.leaves) == 1 && stringLeaf(schema, paths, c.leaves) && (!c.leaf || field.Repeated())
			switch {
			case c.strings:
				c.leaf, c.desc = false, "a list of strings"
			case !c.leaf:
				c.desc = "a list or struct column"
			case field.Repeated():
				c.leaf, c.desc = false, "a repeated column"
			default:
				c.kind = field.Type().Kind()
				c.desc = "a column of type " + c.kind.String()
			}
			cols = append(cols, c)
		}
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	buf := make([]parquet.Row, 128)
	rowNum := 0
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			rowNum++
			cells := make(map[string]cell, len(cols))
			for _, c := range cols {
				cells[c.name] = c.cell(row)
			}
			if ferr := fn(rowNum, cells); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) || (n == 0 && err == nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tasks: %s: row %d: %w", file, rowNum+1, err)
		}
	}
}

// stringLeaf reports whether the one leaf column in leaves holds byte arrays.
func stringLeaf(schema *parquet.Schema, paths [][]string, leaves map[int]bool) bool {
	for i := range leaves {
		leaf, ok := schema.Lookup(paths[i]...)
		return ok && leaf.Node.Type().Kind() == parquet.ByteArray
	}
	return false
}
