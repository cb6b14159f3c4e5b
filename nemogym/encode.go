package nemogym

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
)

// The answers of /run are written by hand: a rollout's answer is mostly token ids,
// logprobs and teacher rows, which reflection-based encoding writes several times
// slower (see BenchmarkServerOverhead).

// MarshalJSON writes the result as one JSON object; see [Result.AppendJSON].
func (r *Result) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// AppendJSON appends the result as one JSON object, on one line: the row's keys
// (sorted, the reserved result keys left out, and the task's hidden keys left out of
// "task": see [Result]), then responses_create_params, response, reward,
// reward_components and the failure keys.
func (r *Result) AppendJSON(b []byte) ([]byte, error) { return r.appendJSON(b, nil, nil) }

// appendJSON is AppendJSON; token id lists that are runs of ids.ids are copied from
// its text (see idText), and the items with token fields but no TeacherRows are
// written with the rows of their turns in rows, when it is not nil (see turnRows).
func (r *Result) appendJSON(b []byte, ids *idText, rows *turnRows) ([]byte, error) {
	if math.IsNaN(r.Reward) || math.IsInf(r.Reward, 0) {
		return nil, fmt.Errorf("nemogym: reward %v is not finite", r.Reward)
	}
	b = append(b, '{')
	keys := make([]string, 0, len(r.Row))
	for k := range r.Row {
		if !slices.Contains(reservedKeys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		b = appendString(b, k)
		b = append(b, ':')
		v := r.Row[k]
		if k == "task" {
			v = shownTask(v)
		}
		if b, err = appendRaw(b, v); err != nil {
			return nil, fmt.Errorf("nemogym: row key %q: %w", k, err)
		}
		b = append(b, ',')
	}
	b = append(b, `"responses_create_params":`...)
	params := r.ResponsesCreateParams
	if params == nil {
		params = json.RawMessage("{}")
	}
	if b, err = appendRaw(b, params); err != nil {
		return nil, fmt.Errorf("nemogym: responses_create_params: %w", err)
	}
	if r.Response != nil {
		b = append(b, `,"response":`...)
		if b, err = r.Response.appendJSON(b, ids, rows); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"reward":`...)
	b = strconv.AppendFloat(b, r.Reward, 'g', -1, 64)
	if len(r.RewardComponents) > 0 {
		b = append(b, `,"reward_components":{`...)
		names := make([]string, 0, len(r.RewardComponents))
		for k := range r.RewardComponents {
			names = append(names, k)
		}
		slices.Sort(names)
		for i, k := range names {
			v := r.RewardComponents[k]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("nemogym: reward component %s is %v", k, v)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, '}')
	}
	if r.FailureClass != "" {
		b = append(b, `,"_ng_failure_class":`...)
		b = appendString(b, r.FailureClass)
		b = append(b, `,"error":`...)
		b = appendString(b, r.Error)
		if r.Terminal {
			b = append(b, `,"_ng_failure_terminal":true`...)
		}
	}
	return append(b, '}'), nil
}

func (r *Response) appendJSON(b []byte, ids *idText, rows *turnRows) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendFloat(b, r.CreatedAt, 'f', -1, 64)
	b = append(b, `,"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"object":"response","output":[`...)
	call := 0 // the turn of the next item with token fields
	for i := range r.Output {
		if i > 0 {
			b = append(b, ',')
		}
		it := &r.Output[i]
		var err error
		if b, err = it.appendJSON(b, ids, rows, call); err != nil {
			return nil, err
		}
		if it.TokenInfo != nil {
			call++
		}
	}
	b = append(b, `],"parallel_tool_calls":`...)
	b = strconv.AppendBool(b, r.ParallelToolCalls)
	b = append(b, `,"tool_choice":`...)
	var err error
	choice := r.ToolChoice
	if choice == nil {
		choice = json.RawMessage(`"auto"`)
	}
	if b, err = appendRaw(b, choice); err != nil {
		return nil, fmt.Errorf("nemogym: tool_choice: %w", err)
	}
	b = append(b, `,"tools":[`...)
	for i, t := range r.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendRaw(b, t); err != nil {
			return nil, fmt.Errorf("nemogym: tools: %w", err)
		}
	}
	b = append(b, `],"incomplete_details":`...)
	if r.IncompleteDetails == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"reason":`...)
		b = appendString(b, r.IncompleteDetails.Reason)
		b = append(b, '}')
	}
	b = append(b, `,"status":`...)
	b = appendString(b, r.Status)
	if r.Usage != nil {
		u, err := json.Marshal(r.Usage)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"usage":`...)
		b = append(b, u...)
	}
	return append(b, '}'), nil
}

// MarshalJSON writes the item with only its type's keys; a NaN or infinite logprob
// is an error.
func (it Item) MarshalJSON() ([]byte, error) { return it.appendJSON(nil, nil, nil, 0) }

// appendJSON appends the item; when it has token fields but no TeacherRows, and rows
// is not nil, it carries the rows of turn call in rows.
func (it *Item) appendJSON(b []byte, ids *idText, rows *turnRows, call int) ([]byte, error) {
	var err error
	b = append(b, `{"type":`...)
	b = appendString(b, it.Type)
	str := func(key, v string) {
		if v != "" {
			b = append(b, ',')
			b = appendString(b, key)
			b = append(b, ':')
			b = appendString(b, v)
		}
	}
	str("id", it.ID)
	str("role", it.Role)
	str("status", it.Status)
	if len(it.Content) > 0 {
		b = append(b, `,"content":[`...)
		for i, c := range it.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, c.Type)
			b = append(b, `,"text":`...)
			b = appendString(b, c.Text)
			b = append(b, `,"annotations":[],"logprobs":null}`...)
		}
		b = append(b, ']')
	}
	if len(it.Summary) > 0 {
		b = append(b, `,"summary":[`...)
		for i, s := range it.Summary {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, s.Type)
			b = append(b, `,"text":`...)
			b = appendString(b, s.Text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	str("call_id", it.CallID)
	str("name", it.Name)
	if it.Arguments != nil {
		b = append(b, `,"arguments":`...)
		b = appendString(b, *it.Arguments)
	}
	if it.Output != nil {
		b = append(b, `,"output":`...)
		b = appendString(b, *it.Output)
	}
	if t := it.TokenInfo; t != nil {
		b = append(b, `,"prompt_token_ids":`...)
		b = ids.appendList(b, t.PromptTokenIDs, 0)
		b = append(b, `,"generation_token_ids":`...)
		b = ids.appendList(b, t.GenerationTokenIDs, len(t.PromptTokenIDs))
		b = append(b, `,"generation_log_probs":`...)
		if b, err = appendFloats(b, t.GenerationLogProbs); err != nil {
			return nil, err
		}
	}
	if r := it.TeacherRows; r != nil {
		b = append(b, `,"teacher_topk_token_ids":[`...)
		for i, row := range r.TokenIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendInt32s(b, row)
		}
		b = append(b, `],"teacher_topk_logprobs":[`...)
		for i, row := range r.Logprobs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendFloats(b, row); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	} else if it.TokenInfo != nil && rows != nil {
		if b, err = rows.appendTurn(b, call); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// turnRows are the teacher rows of a rollout's calls, left in the rollout's opd.Rows
// rather than copied into each call's TeacherRows (response with copyRows false): the
// k-th item with token fields carries the rows of the k-th turn.
type turnRows struct {
	rows  *opd.Rows
	turns []rollout.Turn
}

// appendTurn appends the teacher rows of turn k as TeacherRows are written, after a
// comma: the same keys, and the logprobs floored as items floors them.
func (t *turnRows) appendTurn(b []byte, k int) ([]byte, error) {
	start, end := t.turns[k].Start, t.turns[k].End
	b = append(b, `,"teacher_topk_token_ids":[`...)
	for p := start; p < end; p++ {
		if p > start {
			b = append(b, ',')
		}
		ids, _ := t.rows.Row(p)
		b = jsonscan.AppendInt32s(b, ids)
	}
	b = append(b, `],"teacher_topk_logprobs":[`...)
	for p := start; p < end; p++ {
		if p > start {
			b = append(b, ',')
		}
		_, lps := t.rows.Row(p)
		lps, err := floored(lps)
		if err != nil {
			return nil, fmt.Errorf("nemogym: turn %d: teacher row of generated token %w", k, err)
		}
		if b, err = appendFloats(b, lps); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// idText is a list of token ids (a trajectory's) written once as JSON numbers, for
// the answers that hold runs of them: every call's prompt_token_ids is the
// trajectory up to the call, and its generation_token_ids the tokens after that.
// Copying a run's text costs much less than writing its ids again.
type idText struct {
	ids  []int32
	text []byte  // the ids, separated by commas
	off  []int32 // where id i starts in text; off[len(ids)] is len(text)+1
}

// newIDText writes ids.
func newIDText(ids []int32) *idText {
	t := &idText{ids: ids, text: make([]byte, 0, 7*len(ids)), off: make([]int32, len(ids)+1)}
	for i, id := range ids {
		t.off[i] = int32(len(t.text))
		t.text = jsonscan.AppendInt32(t.text, id)
		t.text = append(t.text, ',')
	}
	t.off[len(ids)] = int32(len(t.text))
	if len(ids) > 0 {
		t.text = t.text[:len(t.text)-1]
	}
	return t
}

// run returns the text of ids (without brackets) when ids is t.ids[from:from+len(ids)],
// the same memory; ok is false otherwise (or when t is nil, or ids empty).
func (t *idText) run(ids []int32, from int) (text []byte, ok bool) {
	if t == nil || len(ids) == 0 || from < 0 || from+len(ids) > len(t.ids) || &ids[0] != &t.ids[from] {
		return nil, false
	}
	return t.text[t.off[from] : t.off[from+len(ids)]-1], true
}

// appendList appends ids as a JSON list, copied from t's text when ids is a run of
// t.ids starting at from.
func (t *idText) appendList(b []byte, ids []int32, from int) []byte {
	if text, ok := t.run(ids, from); ok {
		b = append(b, '[')
		b = append(b, text...)
		return append(b, ']')
	}
	return jsonscan.AppendInt32s(b, ids)
}

// errNotFinite is the error for a NaN or infinite logprob: JSON has no such number.
var errNotFinite = errors.New("nemogym: a logprob is NaN or infinite")

// appendFloats appends float32s as a JSON list, each in the shortest form that
// reads back as the same float32, as strconv's 'g' format writes it (appendFloat32).
//
// Where 'g' writes a value in plain notation (|f| from 1e-4 to below 1e6, or 0: most
// logprobs), its text is encoding/json's, which jsonscan's list writer writes at
// about half the cost of appendFloat32: each run of such values goes to it, and the
// others (logprobs closer to 0, as -2.3841858e-07) to appendFloat32. Every element
// is written after a comma, and the first comma becomes the opening bracket.
func appendFloats(b []byte, fs []float32) ([]byte, error) {
	start := len(b)
	for i := 0; i < len(fs); {
		if f := fs[i]; !plainG(f) {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, errNotFinite
			}
			b = appendFloat32(append(b, ','), f)
			i++
			continue
		}
		j := i + 1
		for j < len(fs) && plainG(fs[j]) {
			j++
		}
		l := len(b)
		b, _ = jsonscan.AppendFloat32s(b, fs[i:j]) // "[…]": finite values only
		b[l] = ','
		b = b[:len(b)-1]
		i = j
	}
	if len(b) == start {
		return append(b, "[]"...), nil
	}
	b[start] = '['
	return append(b, ']'), nil
}

// The bits of the least float32 whose shortest decimal is 1e-4 or more (1e-4's
// nearest) and of 1e6, the bounds of the 'g' format's plain notation; bits order
// non-negative float32s as their values.
const (
	plainGMinBits = 0x38D1B717
	plainGEndBits = 0x49742400
)

// plainG reports whether strconv's 'g' format writes f in plain notation, as
// encoding/json does: 0, or |f| in [1e-4, 1e6).
func plainG(f float32) bool {
	a := math.Float32bits(f) &^ (1 << 31)
	return a == 0 || a-plainGMinBits < plainGEndBits-plainGMinBits
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// appendRaw appends a JSON value from a request, compacted onto one line.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return append(b, buf.Bytes()...), nil
}

// hiddenTaskKey reports whether key, a key of a row's "task" object, holds material
// the agent is never shown (see [Result]).
func hiddenTaskKey(key string) bool {
	return key == "cases" || key == "reference_solution" || strings.HasPrefix(key, "hidden_")
}

// shownTask is a row's task object without its hidden keys; a value that is not an
// object is kept as it is.
func shownTask(raw json.RawMessage) json.RawMessage {
	var task map[string]json.RawMessage
	if json.Unmarshal(raw, &task) != nil || task == nil {
		return raw
	}
	hidden := false
	for k := range task {
		if hiddenTaskKey(k) {
			delete(task, k)
			hidden = true
		}
	}
	if !hidden {
		return raw
	}
	out, err := json.Marshal(task) // keys sorted; each value as sent
	if err != nil {
		return json.RawMessage("{}") // never the hidden keys
	}
	return out
}
