package nemogym

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Writer writes NeMo Gym's rollouts JSON Lines: one /run result per line, with its
// _ng_task_index and _ng_rollout_index, as NeMo Gym's collector writes
// <stem>.jsonl. Failure rows (see [FailRow]) belong in <stem>_failures.jsonl: give
// them a Writer of their own. It is safe for concurrent use; lines are whole.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Err returns the first error a write met; later writes do nothing after one.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Fail records err (when not nil and no error is recorded yet) as the Writer's error:
// later writes do nothing and [Writer.Err] reports it. For callers that cannot return
// a write's error, such as Config.OnGroup.
func (w *Writer) Fail(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// WriteLine writes one JSON value (a /run answer body, say) as a line. The value must
// be one JSON object.
func (w *Writer) WriteLine(obj json.RawMessage) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(obj, &probe); err != nil {
		return fmt.Errorf("nemogym: Writer: not a JSON object: %w", err)
	}
	line, err := json.Marshal(obj) // compacts it onto one line
	if err != nil {
		return fmt.Errorf("nemogym: Writer: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(append(line, '\n')); err != nil {
		w.err = fmt.Errorf("nemogym: Writer: %w", err)
	}
	return w.err
}

// WriteOutcome writes a rollout that ran outside an agent server (Process, say) as a
// rollouts line: the task under "task" (see [TaskFields]), the indices, the initial
// conversation as responses_create_params.input, the response built from out as the
// agent server builds it, the reward and its components.
func (w *Writer) WriteOutcome(taskIndex, rolloutIndex int64, task tasks.Task, out Outcome) error {
	if out.Trajectory == nil {
		return errors.New("nemogym: Writer: the outcome has no trajectory")
	}
	if !RewardSumOK(out.Reward, out.Components) {
		return fmt.Errorf("%w: reward %v, components %v", ErrRewardSum, out.Reward, out.Components)
	}
	row := map[string]json.RawMessage{}
	put := func(k string, v any) {
		b, err := json.Marshal(v)
		if err == nil {
			row[k] = b
		}
	}
	for k, v := range TaskFields(task) {
		put(k, v)
	}
	put("_ng_task_index", taskIndex)
	put("_ng_rollout_index", rolloutIndex)
	params, err := json.Marshal(map[string]any{"input": inputItems(out.Trajectory.Messages, out.Trajectory.Turns)})
	if err != nil {
		return fmt.Errorf("nemogym: Writer: %w", err)
	}
	resp, err := response(fmt.Sprintf("resp_%d_%d", taskIndex, rolloutIndex), 0, "policy", nil, out, true)
	if err != nil {
		return err
	}
	b, err := json.Marshal(&Result{Row: row, ResponsesCreateParams: params, Response: resp, Reward: out.Reward, RewardComponents: out.Components})
	if err != nil {
		return fmt.Errorf("nemogym: Writer: %w", err)
	}
	return w.WriteLine(b)
}

// inputItems are the messages before the first assistant turn, as input messages.
func inputItems(msgs []chat.Message, turns []rollout.Turn) []map[string]string {
	n := len(msgs)
	if len(turns) > 0 {
		n = turns[0].Message
	}
	out := make([]map[string]string, 0, n)
	for _, m := range msgs[:n] {
		out = append(out, map[string]string{"type": "message", "role": m.Role, "content": m.Content})
	}
	return out
}
