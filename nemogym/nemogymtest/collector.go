package nemogymtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Driver says which collector the fake plays.
type Driver int

const (
	// NeMoRL drives as NeMo RL's NemoGym actor: rows carry _rowidx and the trainer's
	// sampling, _ng_task_index per group and no _ng_rollout_index; a non-2xx /run is
	// classified by status (see [Classify]) and the first failure ends the run.
	NeMoRL Driver = iota
	// Standalone drives as NeMo Gym's collector (gym eval run): _ng_task_index and
	// _ng_rollout_index on every row; any non-2xx /run or unreadable body aborts the
	// run; 200 rows with _ng_failure_class are failures, not results.
	Standalone
)

// Failure classes of [Classify], NeMo RL's.
const (
	Infra = "INFRA"
	Data  = "DATA"
)

// Classify is NeMo RL's classification of a /run status: 5xx, 408 and 429 are
// infrastructure failures (retried), any other non-2xx a data failure; 2xx is "".
func Classify(status int) string {
	switch {
	case status/100 == 2:
		return ""
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return Infra
	}
	return Data
}

// RunError is a /run that failed, classified.
type RunError struct {
	Row    int    // the row's place in the dispatch list
	Status int    // the HTTP status, 0 for a transport or decoding failure
	Class  string // Infra or Data
	Body   string
}

// Error says which row failed, how and why.
func (e *RunError) Error() string {
	return fmt.Sprintf("nemogymtest: /run of row %d: %s failure, status %d: %s", e.Row, e.Class, e.Status, e.Body)
}

// Collector is a fake of the process that sends rows to an agent server.
type Collector struct {
	// AgentURL is the agent server's base URL. Required.
	AgentURL string
	// Driver is the collector played; the zero value is NeMoRL.
	Driver Driver
	// Temperature, TopP and MaxNewTokens are stamped into every row under NeMoRL.
	Temperature, TopP float64
	MaxNewTokens      int
	// HTTPClient sends the requests; nil means one without timeouts, as Gym's.
	HTTPClient *http.Client
	// RetryTransport re-sends a /run whose connection failed (every 10 ms, until ctx
	// ends), as Gym's client does forever every 0.5 s.
	RetryTransport bool
}

// Run is one finished /run.
type Run struct {
	// Row is the row sent.
	Row map[string]any
	// Result is the answer, with the collector's keys stamped into it.
	Result map[string]json.RawMessage
	// Raw is the answer body as received.
	Raw []byte
}

// Expand turns dataset rows into the dispatch list: each row's _ng_task_index (kept,
// else by exact JSON text, in first-seen order), repeats copies in a row (aabb), and
// under Standalone _ng_rollout_index counted per task across the whole list; under
// NeMoRL _rowidx and the sampling values instead.
func (c *Collector) Expand(rows []map[string]any, repeats int) ([]map[string]any, error) {
	if repeats < 1 {
		return nil, fmt.Errorf("nemogymtest: %d repeats", repeats)
	}
	byText := map[string]int64{}
	perTask := map[int64]int64{}
	var out []map[string]any
	for i, r := range rows {
		text, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("nemogymtest: row %d: %w", i, err)
		}
		var idx int64
		if v, ok := r["_ng_task_index"]; ok {
			f, ok := v.(int64)
			if !ok {
				if n, isInt := v.(int); isInt {
					f, ok = int64(n), true
				}
			}
			if !ok {
				return nil, fmt.Errorf("nemogymtest: row %d: _ng_task_index is %T", i, v)
			}
			idx = f
		} else if n, ok := byText[string(text)]; ok {
			idx = n
		} else {
			idx = int64(len(byText))
			byText[string(text)] = idx
		}
		for range repeats {
			var cp map[string]any
			_ = json.Unmarshal(text, &cp) // a deep copy
			cp["_ng_task_index"] = idx
			if _, ok := cp["agent_ref"]; !ok {
				cp["agent_ref"] = map[string]any{"name": "go_agent"}
			}
			if c.Driver == Standalone {
				cp["_ng_rollout_index"] = perTask[idx]
				perTask[idx]++
			} else {
				cp["_rowidx"] = len(out)
				params, _ := cp["responses_create_params"].(map[string]any)
				if params == nil {
					params = map[string]any{}
					cp["responses_create_params"] = params
				}
				params["temperature"], params["top_p"] = c.Temperature, c.TopP
				if c.MaxNewTokens > 0 {
					if v, ok := params["max_output_tokens"].(float64); !ok || int(v) > c.MaxNewTokens {
						params["max_output_tokens"] = c.MaxNewTokens
					}
				}
			}
			out = append(out, cp)
		}
	}
	return out, nil
}

// Run expands rows and sends them all at once, returning the answers in dispatch
// order. Under NeMoRL the first failed /run ends the run with a [*RunError]; under
// Standalone a non-2xx or unreadable answer aborts it with one, and 200 answers with
// _ng_failure_class are returned in failures instead of runs.
func (c *Collector) Run(ctx context.Context, rows []map[string]any, repeats int) (runs, failures []Run, err error) {
	list, err := c.Expand(rows, repeats)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]Run, len(list))
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for i, row := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.send(ctx, i, row)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			results[i] = r
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, nil, first
	}
	for _, r := range results {
		if _, failed := r.Result["_ng_failure_class"]; failed && string(r.Result["_ng_failure_class"]) != "null" {
			failures = append(failures, r)
		} else {
			runs = append(runs, r)
		}
	}
	return runs, failures, nil
}

func (c *Collector) send(ctx context.Context, i int, row map[string]any) (Run, error) {
	body, err := json.Marshal(row)
	if err != nil {
		return Run{}, err
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.AgentURL, "/")+"/run", bytes.NewReader(body))
		if err != nil {
			return Run{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			if c.RetryTransport && ctx.Err() == nil {
				select {
				case <-time.After(10 * time.Millisecond):
					continue
				case <-ctx.Done():
				}
			}
			return Run{}, &RunError{Row: i, Class: Infra, Body: err.Error()}
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return Run{}, &RunError{Row: i, Status: resp.StatusCode, Class: Infra, Body: err.Error()}
		}
		if class := Classify(resp.StatusCode); class != "" {
			return Run{}, &RunError{Row: i, Status: resp.StatusCode, Class: class, Body: string(raw)}
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil || res == nil {
			return Run{}, &RunError{Row: i, Status: resp.StatusCode, Class: Data, Body: "the answer is not a JSON object"}
		}
		for _, k := range []string{"_ng_task_index", "_ng_rollout_index", "agent_ref", "_ng_attempt_index", "_ng_rollout_id"} {
			if v, ok := row[k]; ok {
				b, _ := json.Marshal(v)
				res[k] = b
			}
		}
		return Run{Row: row, Result: res, Raw: raw}, nil
	}
}
