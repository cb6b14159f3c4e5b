package nemogym

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd/tasks"
)

// ErrBadRow is wrapped by the errors for a /run body this server cannot use: not a
// JSON object, responses_create_params missing or holding a key the Responses API
// does not have, or no task. NeMo RL counts the 422 it gets as a data failure.
var ErrBadRow = errors.New("nemogym: bad /run row")

// allowedParams are the keys Gym's responses_create_params accepts (extra="forbid").
var allowedParams = []string{"background", "include", "input", "instructions", "max_output_tokens",
	"max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt",
	"reasoning", "service_tier", "store", "temperature", "text", "tool_choice", "tools",
	"top_logprobs", "top_p", "truncation", "user", "stream"}

// Row is a parsed /run body.
type Row struct {
	// Fields are all of the row's keys, as sent.
	Fields map[string]json.RawMessage
	// Params are the keys of responses_create_params.
	Params map[string]json.RawMessage
	// Sampling is what Params say about sampling.
	Sampling Sampling
	// TaskIndex and RolloutIndex are _ng_task_index and _ng_rollout_index, nil when
	// absent (NeMo RL sends no rollout index).
	TaskIndex, RolloutIndex *int64
	// Attempt is _ng_attempt_index, 0 when absent.
	Attempt int64
	// RolloutID is the rollout's id as NeMo Gym derives it: _ng_rollout_id when the
	// row has one, else "<_ng_task_index>-<_ng_rollout_index>" when it has both,
	// with "-a<n>" appended for an _ng_attempt_index n ≥ 1; "" when the row gives
	// none (NeMo RL's rows, which have no rollout index). The model calls of the
	// rollout carry it in NeMo Gym's /ng-rollout/<id>/ path prefix (see [Policy]).
	RolloutID string
	// Task is the task the row names.
	Task tasks.Task
}

// wireTask is a task as a row carries it under "task".
type wireTask struct {
	ID          string `json:"id"`
	Statement   string `json:"statement"`
	TestCode    string `json:"test_code"`
	HiddenTests string `json:"hidden_tests"`
	Difficulty  string `json:"difficulty"`
	Language    string `json:"language"`
	Cases       []struct {
		Input  string `json:"input"`
		Output string `json:"output"`
	} `json:"cases"`
}

// TaskFields returns the row keys that carry t under "task": id, statement,
// test_code, hidden_tests, cases ([{input, output}]), difficulty, language. The
// reference solution is never sent.
func TaskFields(t tasks.Task) map[string]any {
	cases := make([]map[string]string, len(t.Cases))
	for i, c := range t.Cases {
		cases[i] = map[string]string{"input": c.Input, "output": c.Output}
	}
	return map[string]any{"task": map[string]any{
		"id": t.ID, "statement": t.Statement, "test_code": t.TestCode, "hidden_tests": t.HiddenTests,
		"cases": cases, "difficulty": t.Difficulty, "language": t.Language,
	}}
}

// ParseRow reads a /run body. A task comes from "task" (see [TaskFields]) or from
// "task_id", looked up in known.
func ParseRow(body []byte, known []tasks.Task) (*Row, error) {
	r := &Row{}
	if err := json.Unmarshal(body, &r.Fields); err != nil || r.Fields == nil {
		return nil, fmt.Errorf("%w: the body is not a JSON object", ErrBadRow)
	}
	raw, ok := r.Fields["responses_create_params"]
	if !ok || json.Unmarshal(raw, &r.Params) != nil || r.Params == nil {
		return nil, fmt.Errorf("%w: responses_create_params is missing or not an object", ErrBadRow)
	}
	var extra []string
	for k := range r.Params {
		if !slices.Contains(allowedParams, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, fmt.Errorf("%w: responses_create_params has keys the Responses API does not: %s", ErrBadRow, strings.Join(extra, ", "))
	}
	if v, ok := r.Params["stream"]; ok && string(v) != "null" && string(v) != "false" {
		return nil, fmt.Errorf("%w: responses_create_params.stream must be false", ErrBadRow)
	}
	if err := r.readSampling(); err != nil {
		return nil, err
	}
	for key, dst := range map[string]**int64{"_ng_task_index": &r.TaskIndex, "_ng_rollout_index": &r.RolloutIndex} {
		if v, ok := r.Fields[key]; ok && string(v) != "null" {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, fmt.Errorf("%w: %s is not an integer", ErrBadRow, key)
			}
			*dst = &n
		}
	}
	if v, ok := r.Fields["_ng_attempt_index"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &r.Attempt); err != nil {
			return nil, fmt.Errorf("%w: _ng_attempt_index is not an integer", ErrBadRow)
		}
	}
	if err := r.readRolloutID(); err != nil {
		return nil, err
	}
	t, err := rowTask(r.Fields, known)
	if err != nil {
		return nil, err
	}
	r.Task = t
	return r, nil
}

// rolloutIDPattern is what NeMo Gym accepts as a rollout id: one path segment that
// survives a round trip and does not begin with a dot.
var rolloutIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// readRolloutID sets RolloutID. An explicit id that NeMo Gym would refuse is a bad
// row, not an id rewritten into another (its captures could not be found under it).
func (r *Row) readRolloutID() error {
	if v, ok := r.Fields["_ng_rollout_id"]; ok && string(v) != "null" {
		var id string
		if err := json.Unmarshal(v, &id); err != nil || !rolloutIDPattern.MatchString(id) {
			return fmt.Errorf("%w: _ng_rollout_id is %s; want a string of letters, digits, dots, dashes and underscores that begins with a letter or digit",
				ErrBadRow, v)
		}
		r.RolloutID = id
	} else if r.TaskIndex != nil && r.RolloutIndex != nil {
		r.RolloutID = fmt.Sprintf("%d-%d", *r.TaskIndex, *r.RolloutIndex)
	} else {
		return nil
	}
	if r.Attempt > 0 {
		r.RolloutID += fmt.Sprintf("-a%d", r.Attempt)
	}
	return nil
}

func (r *Row) readSampling() error {
	num := func(key string) (*float64, error) {
		v, ok := r.Params[key]
		if !ok || string(v) == "null" {
			return nil, nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, fmt.Errorf("%w: responses_create_params.%s is not a number", ErrBadRow, key)
		}
		return &f, nil
	}
	var err error
	if r.Sampling.Temperature, err = num("temperature"); err != nil {
		return err
	}
	if r.Sampling.TopP, err = num("top_p"); err != nil {
		return err
	}
	m, err := num("max_output_tokens")
	if err != nil {
		return err
	}
	if m != nil {
		if *m < 1 || *m != float64(int(*m)) {
			return fmt.Errorf("%w: responses_create_params.max_output_tokens is %v, want a positive integer", ErrBadRow, *m)
		}
		r.Sampling.MaxOutputTokens = int(*m)
	}
	return nil
}

func rowTask(fields map[string]json.RawMessage, known []tasks.Task) (tasks.Task, error) {
	if raw, ok := fields["task"]; ok {
		var w wireTask
		if err := json.Unmarshal(raw, &w); err != nil {
			return tasks.Task{}, fmt.Errorf("%w: task: %v", ErrBadRow, err)
		}
		if strings.TrimSpace(w.Statement) == "" {
			return tasks.Task{}, fmt.Errorf("%w: task.statement is empty", ErrBadRow)
		}
		t := tasks.Task{ID: w.ID, Statement: w.Statement, TestCode: w.TestCode, HiddenTests: w.HiddenTests,
			Difficulty: w.Difficulty, Language: w.Language}
		for _, c := range w.Cases {
			t.Cases = append(t.Cases, tasks.Case{Input: c.Input, Output: c.Output})
		}
		return t, nil
	}
	if raw, ok := fields["task_id"]; ok {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return tasks.Task{}, fmt.Errorf("%w: task_id is not a string", ErrBadRow)
		}
		for _, t := range known {
			if t.ID == id {
				return t, nil
			}
		}
		return tasks.Task{}, fmt.Errorf("%w: no task with task_id %q", ErrBadRow, id)
	}
	return tasks.Task{}, fmt.Errorf("%w: the row has neither task nor task_id", ErrBadRow)
}
