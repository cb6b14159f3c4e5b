package nemogymtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/agentic-opd/agenticopd/nemogym"
)

// Errors of the trainer's post-processing checks; [CheckResult] and [CheckGroups]
// wrap them (joined with errors.Join when several fail).
var (
	ErrNotObject  = errors.New("C2: the result is not a JSON object")
	ErrMissingKey = errors.New("C3: a required key is missing")
	//lint:ignore ST1005 the text after the check's number is NeMo RL's assertion message
	ErrNonContiguous = errors.New("C4: Non-contiguous messages found!")
	ErrNoTrainable   = errors.New("C5: no item with generation_token_ids")
	ErrNaN           = errors.New("C6: Generation logprobs contain NaN")
	ErrLogprobCount  = errors.New("the number of generation_log_probs differs from generation_token_ids")
	ErrPartialTokens = errors.New("the three token fields do not come together")
	ErrRewardSum     = errors.New("C9: reward != sum(reward_components)")
	ErrGroup         = errors.New("C10: group integrity")
	ErrTeacherRows   = errors.New("teacher rows do not match generation_token_ids")
)

// result is the part of a /run answer the checks read.
type result struct {
	Response *struct {
		Output *[]json.RawMessage `json:"output"`
	} `json:"response"`
	Params           json.RawMessage            `json:"responses_create_params"`
	Reward           *float64                   `json:"reward"`
	RewardComponents map[string]float64         `json:"reward_components"`
	Raw              map[string]json.RawMessage `json:"-"`
}

// CheckResult applies NeMo RL's post-processing checks to one /run answer: C2 an
// object, C3 response, response.output, responses_create_params and reward present,
// the token fields all three or none, as many logprobs as generated ids, C4 every
// trainable item's prompt extends all earlier prompts and generations, C5 at least one
// trainable item, C9 reward equal to the plain sum of reward_components (rel 1e-5, abs
// 1e-6), and this library's teacher rows, when present, one per generated id. It
// returns every violation, joined. (C6, NaN, cannot travel in JSON: [CheckItems]
// checks it on decoded items.)
func CheckResult(body []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return ErrNotObject
	}
	var r result
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	var errs []error
	switch {
	case r.Response == nil:
		errs = append(errs, fmt.Errorf("%w: response", ErrMissingKey))
	case r.Response.Output == nil:
		errs = append(errs, fmt.Errorf("%w: response.output", ErrMissingKey))
	}
	if r.Params == nil {
		errs = append(errs, fmt.Errorf("%w: responses_create_params", ErrMissingKey))
	}
	if r.Reward == nil {
		errs = append(errs, fmt.Errorf("%w: reward", ErrMissingKey))
	} else if !nemogym.RewardSumOK(*r.Reward, r.RewardComponents) {
		errs = append(errs, fmt.Errorf("%w: reward %v, components %v", ErrRewardSum, *r.Reward, r.RewardComponents))
	}
	if r.Response != nil && r.Response.Output != nil {
		items := make([]nemogym.Item, len(*r.Response.Output))
		for i, it := range *r.Response.Output {
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(it, &keys); err != nil {
				errs = append(errs, fmt.Errorf("%w: output[%d] is not an object", ErrMissingKey, i))
				continue
			}
			n := 0
			for _, k := range []string{"prompt_token_ids", "generation_token_ids", "generation_log_probs"} {
				if v, ok := keys[k]; ok && string(v) != "null" {
					n++
				}
			}
			if n != 0 && n != 3 {
				errs = append(errs, fmt.Errorf("%w: output[%d] has %d of them", ErrPartialTokens, i, n))
			}
			if _, ok := keys["type"]; !ok {
				errs = append(errs, fmt.Errorf("%w: output[%d].type", ErrMissingKey, i))
			}
			if err := json.Unmarshal(it, &items[i]); err != nil {
				errs = append(errs, fmt.Errorf("output[%d]: %v", i, err))
			}
		}
		if err := CheckItems(items); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckItems applies the checks on output items: C4 contiguity with NeMo RL's
// semantics (only items with non-empty generation_token_ids count), C5, C6 (NaN),
// the logprob count, and the teacher rows' shape.
func CheckItems(items []nemogym.Item) error {
	var errs []error
	var seen []int32
	trainable := 0
	for i, it := range items {
		if it.TeacherRows != nil {
			n := 0
			if it.TokenInfo != nil {
				n = len(it.GenerationTokenIDs)
			}
			if len(it.TeacherRows.TokenIDs) != n || len(it.TeacherRows.Logprobs) != n {
				errs = append(errs, fmt.Errorf("%w: output[%d] has %d and %d rows for %d generated ids", ErrTeacherRows, i,
					len(it.TeacherRows.TokenIDs), len(it.TeacherRows.Logprobs), n))
			} else {
				for p := range n {
					if len(it.TeacherRows.TokenIDs[p]) != len(it.TeacherRows.Logprobs[p]) {
						errs = append(errs, fmt.Errorf("%w: output[%d] row %d has %d ids and %d logprobs", ErrTeacherRows, i, p,
							len(it.TeacherRows.TokenIDs[p]), len(it.TeacherRows.Logprobs[p])))
					}
				}
			}
		}
		if it.TokenInfo == nil || len(it.GenerationTokenIDs) == 0 {
			continue
		}
		trainable++
		if len(it.GenerationLogProbs) != len(it.GenerationTokenIDs) {
			errs = append(errs, fmt.Errorf("%w: output[%d]: %d for %d", ErrLogprobCount, i, len(it.GenerationLogProbs), len(it.GenerationTokenIDs)))
		}
		if slices.ContainsFunc(it.GenerationLogProbs, func(f float32) bool { return math.IsNaN(float64(f)) }) {
			errs = append(errs, fmt.Errorf("%w: output[%d]", ErrNaN, i))
		}
		p := it.PromptTokenIDs
		if len(p) < len(seen) || !slices.Equal(p[:len(seen)], seen) {
			errs = append(errs, fmt.Errorf("%w: output[%d]'s prompt does not begin with the %d tokens before it", ErrNonContiguous, i, len(seen)))
		}
		seen = append(slices.Clone(p), it.GenerationTokenIDs...)
	}
	if trainable == 0 {
		errs = append(errs, ErrNoTrainable)
	}
	return errors.Join(errs...)
}

// CheckGroups applies NeMo RL's group integrity check (C10) to a run's answers:
// grouped by _ng_task_index, every group has size answers, one agent, and, where
// rollout indices are present, each of 0..size−1 once.
func CheckGroups(runs []Run, size int) error {
	type group struct {
		rollouts []int64
		agents   map[string]bool
	}
	groups := map[int64]*group{}
	var errs []error
	for i, r := range runs {
		var idx int64
		if err := json.Unmarshal(r.Result["_ng_task_index"], &idx); err != nil {
			errs = append(errs, fmt.Errorf("%w: answer %d has no _ng_task_index", ErrGroup, i))
			continue
		}
		g := groups[idx]
		if g == nil {
			g = &group{agents: map[string]bool{}}
			groups[idx] = g
		}
		var ref struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(r.Result["agent_ref"], &ref)
		g.agents[ref.Name] = true
		if v, ok := r.Result["_ng_rollout_index"]; ok {
			var ri int64
			if err := json.Unmarshal(v, &ri); err == nil {
				g.rollouts = append(g.rollouts, ri)
			}
		}
	}
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	for _, k := range keys {
		g := groups[k]
		n := len(g.agents)
		if n != 1 {
			errs = append(errs, fmt.Errorf("%w: task %d has %d agents", ErrGroup, k, n))
		}
		count := 0
		for _, r := range runs {
			var idx int64
			if json.Unmarshal(r.Result["_ng_task_index"], &idx) == nil && idx == k {
				count++
			}
		}
		if count != size {
			errs = append(errs, fmt.Errorf("%w: task %d has %d answers, want %d", ErrGroup, k, count, size))
		}
		if len(g.rollouts) > 0 {
			slices.Sort(g.rollouts)
			for j, ri := range g.rollouts {
				if ri != int64(j) {
					errs = append(errs, fmt.Errorf("%w: task %d has rollout indices %v, want 0..%d once each", ErrGroup, k, g.rollouts, size-1))
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}
