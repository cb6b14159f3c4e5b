package tasks

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Column names read by the loaders.
const (
	// DefaultPromptField is the column read first for the task text.
	DefaultPromptField = "prompt"
	// ColumnTask is the fallback column for the task text.
	ColumnTask = "task"
	// ColumnTestCode is the column read first for the test code.
	ColumnTestCode = "test_code"
	// ColumnTests is the fallback column for the test code.
	ColumnTests = "tests"
	// ColumnDifficulty holds the difficulty label.
	ColumnDifficulty = "difficulty"
	// ColumnID holds the task id (a string or an integer).
	ColumnID = "id"
	// ColumnHiddenTests holds test code that is never shown to the agent.
	ColumnHiddenTests = "hidden_tests"
	// ColumnInputs holds the inputs of the input/output cases (a list of strings).
	ColumnInputs = "inputs"
	// ColumnOutputs holds the expected outputs of the cases (a list of strings, as
	// long as the inputs).
	ColumnOutputs = "outputs"
)

// ErrMalformed is wrapped by every [*RowError].
var ErrMalformed = errors.New("tasks: malformed row")

// ErrNoTests is wrapped by a loader's error when no task it read has anything to
// verify with (see [LoadConfig.AllowNoTests]).
var ErrNoTests = errors.New("tasks: no task has tests")

// LoadConfig configures the loaders. The zero value reads the default columns.
type LoadConfig struct {
	// PromptField is the column read first for the task text; "" means
	// DefaultPromptField. The "task" column is the fallback.
	PromptField string
	// AllowNoTests accepts a source in which no task has tests. By default that is an
	// error wrapping [ErrNoTests]: every rollout of such a task scores the same, so
	// every group would be dropped (or trained on a reward that says nothing).
	AllowNoTests bool
}

// check is the loaders' verdict on a whole source (a file, or a Hub split) named
// name: no task at all is an error wrapping [ErrNoTasks], no task with tests one
// wrapping [ErrNoTests] unless cfg allows it. Either names the source and says what
// was read, so a wrong column name or an empty file is plain.
func (r LoadReport) check(name string, cfg LoadConfig) error {
	switch {
	case r.Loaded == 0 && r.Rows == 0:
		return fmt.Errorf("%w: %s has no rows", ErrNoTasks, name)
	case r.Loaded == 0:
		return fmt.Errorf("%w: %s: none of its %d rows has task text (columns %q or %q)",
			ErrNoTasks, name, r.Rows, cfg.promptField(), ColumnTask)
	case r.NoTests == r.Loaded && !cfg.AllowNoTests:
		return fmt.Errorf("%w: %s: none of its %d tasks has tests (columns %q, %q, %q, or %q with %q), "+
			"so every rollout would score the same; add tests, or set LoadConfig.AllowNoTests",
			ErrNoTests, name, r.Loaded, ColumnTestCode, ColumnTests, ColumnHiddenTests, ColumnInputs, ColumnOutputs)
	}
	return nil
}

func (c LoadConfig) promptField() string {
	if c.PromptField == "" {
		return DefaultPromptField
	}
	return c.PromptField
}

// LoadReport says what a loader read.
type LoadReport struct {
	// Files are the files read, in order.
	Files []string
	// Rows is the number of rows read (blank JSONL lines are not rows).
	Rows int
	// Loaded is the number of tasks returned.
	Loaded int
	// SkippedNoTask counts rows without task text.
	SkippedNoTask int
	// NoTests counts returned tasks without anything to verify with: no test code,
	// no hidden tests and no input/output cases.
	NoTests int
}

func (r *LoadReport) add(o LoadReport) {
	r.Files = append(r.Files, o.Files...)
	r.Rows += o.Rows
	r.Loaded += o.Loaded
	r.SkippedNoTask += o.SkippedNoTask
	r.NoTests += o.NoTests
}

// RowError is a malformed row. It wraps [ErrMalformed].
type RowError struct {
	// File is the file (or source name) the row came from.
	File string
	// Row counts from 1; in a JSONL file it is the line number.
	Row int
	// Column is the offending column, or "" when the row as a whole is malformed.
	Column string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tasks: %s: row %d", e.File, e.Row)
	if e.Column != "" {
		fmt.Fprintf(&b, ": column %q", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns [ErrMalformed].
func (e *RowError) Unwrap() error { return ErrMalformed }

// cell is one column value of a row, as the loaders see it.
type cell struct {
	null bool
	// text is set for string values.
	text   string
	isText bool
	// integer is set for integer values.
	integer int64
	isInt   bool
	// list is set for lists of strings (without null elements).
	list   []string
	isList bool
	// kind names the value's type for error messages.
	kind string
}

// rowReader builds tasks from rows with the column rules of the package doc.
type rowReader struct {
	file   string // for errors
	source string // for generated ids
	cfg    LoadConfig
	report LoadReport
}

// columns lists the columns a row may need, so loaders convert only those.
func (r *rowReader) columns() []string {
	cols := []string{r.cfg.promptField(), ColumnTask, ColumnTestCode, ColumnTests, ColumnDifficulty, ColumnID,
		ColumnHiddenTests, ColumnInputs, ColumnOutputs}
	if cols[0] == ColumnTask {
		cols = cols[1:]
	}
	return cols
}

// add turns one row into a task. ok is false for a row without task text.
func (r *rowReader) add(row int, cells map[string]cell) (t Task, ok bool, err error) {
	r.report.Rows++
	text := func(cols ...string) (string, error) {
		for _, col := range cols {
			c, present := cells[col]
			if !present || c.null {
				continue
			}
			if !c.isText {
				return "", &RowError{File: r.file, Row: row, Column: col, Reason: "want a string, have " + c.kind}
			}
			if strings.TrimSpace(c.text) != "" {
				return c.text, nil
			}
		}
		return "", nil
	}
	statement, err := text(r.cfg.promptField(), ColumnTask)
	if err != nil {
		return Task{}, false, err
	}
	tests, err := text(ColumnTestCode, ColumnTests)
	if err != nil {
		return Task{}, false, err
	}
	difficulty, err := text(ColumnDifficulty)
	if err != nil {
		return Task{}, false, err
	}
	hidden, err := text(ColumnHiddenTests)
	if err != nil {
		return Task{}, false, err
	}
	cases, err := r.cases(row, cells)
	if err != nil {
		return Task{}, false, err
	}
	id := r.source + ":" + strconv.Itoa(row)
	if c, present := cells[ColumnID]; present && !c.null {
		switch {
		case c.isText && c.text != "":
			id = c.text
		case c.isInt:
			id = strconv.FormatInt(c.integer, 10)
		case !c.isText:
			return Task{}, false, &RowError{File: r.file, Row: row, Column: ColumnID, Reason: "want a string or an integer, have " + c.kind}
		}
	}
	if statement == "" {
		r.report.SkippedNoTask++
		return Task{}, false, nil
	}
	if difficulty == "" {
		difficulty = DifficultyUnknown
	}
	t = Task{
		ID:          id,
		Statement:   statement,
		TestCode:    tests,
		HiddenTests: hidden,
		Cases:       cases,
		Difficulty:  difficulty,
		Language:    LanguagePython,
	}
	if !t.HasTests() {
		r.report.NoTests++
	}
	r.report.Loaded++
	return t, true, nil
}

// cases reads the inputs and outputs columns: both lists of strings of the same
// length, or both absent (or null).
func (r *rowReader) cases(row int, cells map[string]cell) ([]Case, error) {
	list := func(col string) ([]string, bool, error) {
		c, present := cells[col]
		if !present || c.null {
			return nil, false, nil
		}
		if !c.isList {
			return nil, false, &RowError{File: r.file, Row: row, Column: col, Reason: "want a list of strings, have " + c.kind}
		}
		return c.list, true, nil
	}
	in, hasIn, err := list(ColumnInputs)
	if err != nil {
		return nil, err
	}
	out, hasOut, err := list(ColumnOutputs)
	if err != nil {
		return nil, err
	}
	switch {
	case hasIn != hasOut:
		return nil, &RowError{File: r.file, Row: row, Column: ColumnOutputs,
			Reason: "inputs and outputs come together: give both lists, or neither"}
	case len(in) != len(out):
		return nil, &RowError{File: r.file, Row: row, Column: ColumnOutputs,
			Reason: fmt.Sprintf("%d outputs for %d inputs", len(out), len(in))}
	case len(in) == 0:
		return nil, nil
	}
	cases := make([]Case, len(in))
	for i := range in {
		cases[i] = Case{Input: in[i], Output: out[i]}
	}
	return cases, nil
}
