package atropos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
)

// EnvStatus is the reply of GET /status-env: the back-pressure inputs of one env.
type EnvStatus struct {
	// CurrentStep is the API's step: the number of batches formed for the trainer.
	CurrentStep int `json:"current_step"`
	// QueueSize counts queued data in groups of this env's size, including other envs'
	// data beyond their reserved minimums.
	QueueSize int `json:"queue_size"`
	// UnallocatedFraction is 1 minus the minimum allocations of the connected envs.
	UnallocatedFraction float64 `json:"unallocated_fraction"`
	// SelfQueueSize counts this env's own queued groups.
	SelfQueueSize int `json:"self_queue_size"`
	// MaxGroupSize is the largest group size in the queue (at least 1).
	MaxGroupSize int `json:"max_group_size"`
	// EnvWeight is this env's share of inference capacity (at least 0.01).
	EnvWeight float64 `json:"env_weight"`
}

// Status polls GET /status-env for this env, retrying network errors and 5xx replies
// like every call. The API wants the env id as a JSON body on a GET; this is the only
// place that knows it.
//
// Status answers only with figures of a registration known to be current: after a
// failed request it verifies the registration first, and when the API lost it (a
// restart or /reset_data), Status registers again in the start-up order before polling
// (see [Client.Send]). A reply whose current_step is below the highest seen shows a
// reset too: it is not returned, and Status registers again. While the API waits for a
// trainer, Status waits too, until ctx ends ([ErrWaitingForTrainer]).
func (c *Client) Status(ctx context.Context) (EnvStatus, error) {
	for {
		var st EnvStatus
		var tick, epoch uint64
		err := c.retry(ctx, "GET /status-env", true, func(ctx context.Context, reg Registration, e uint64) error {
			epoch, tick = e, c.tick()
			if !c.tried(e, c.cfg.Now()) {
				return errStaleRegistration
			}
			return c.api.statusEnv(ctx, reg.EnvID, &st)
		})
		if err != nil {
			return EnvStatus{}, err
		}
		if c.observe(epoch, st, tick) {
			c.maybeCheckPreds(ctx)
			return st, nil
		}
	}
}

// statusEnv sends GET /status-env with the body {"env_id": id}. Should the API move to
// a query parameter (?env_id=), only this function changes.
func (a *api) statusEnv(ctx context.Context, envID int, out *EnvStatus) error {
	body := fmt.Appendf(nil, `{"env_id":%d}`, envID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base.String()+"/status-env", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("atropos: GET /status-env: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	defer a.begin()()
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("atropos: GET /status-env: %w", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("atropos: GET /status-env: reading reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return &APIError{Method: http.MethodGet, Path: "/status-env", Status: resp.StatusCode, Message: errorMessage(buf.Bytes()), RetryAfter: retryAfter(resp.Header, time.Now())}
	}
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		return &APIError{Method: http.MethodGet, Path: "/status-env", Status: http.StatusOK, Message: fmt.Sprintf("unexpected reply %.200q: %v", buf.Bytes(), err)}
	}
	return nil
}

// PacingParams are the env settings the back-pressure rules need.
type PacingParams struct {
	BatchSize           int      // the trainer's batch size, from /info
	GroupSize           int      // this env's group size
	MaxBatchesOffPolicy int      // pause threshold in batches; <= 0 never pauses for queue size
	TotalSteps          int      // stop rule limit; <= 0 never stops
	MinBatchAllocation  *float64 // this env's reserved share, or nil
	MaxWorkers          int      // cap on running work; 0 = no cap
}

// Decision is what an env should do now.
type Decision struct {
	// Stop: the trainer will have all the steps it needs; stop producing.
	Stop bool
	// Pause: enough data is queued; cancel or hold new work.
	Pause bool
	// Start is how many more units of work (groups in flight) may start.
	Start int
}

// unlimited stands for "no bound" in Decision.Start computations.
const unlimited = 1 << 30

// pace applies the rules of [Client.Pace] to a status, with running units of work in
// flight.
func pace(st EnvStatus, p PacingParams, running int) Decision {
	var d Decision
	if p.BatchSize <= 0 || p.GroupSize <= 0 {
		d.Pause = true
		return d
	}
	if p.TotalSteps > 0 && st.CurrentStep+st.QueueSize*p.GroupSize/p.BatchSize > p.TotalSteps {
		d.Stop, d.Pause = true, true
		return d
	}
	mbo := p.MaxBatchesOffPolicy
	mg := max(st.MaxGroupSize, 1)
	minAlloc := 0.0
	if p.MinBatchAllocation != nil {
		minAlloc = *p.MinBatchAllocation
	}
	if mbo > 0 && st.QueueSize*p.GroupSize >= mbo*p.BatchSize {
		covered := true
		if p.MinBatchAllocation != nil {
			share := ceilDiv(minAlloc*float64(p.BatchSize*mbo), float64(mg))
			covered = share*max(mg/p.GroupSize, 1)-st.SelfQueueSize <= 0
		}
		if covered {
			d.Pause = true
			return d
		}
	}
	if p.MaxWorkers > 0 && running >= p.MaxWorkers {
		return d
	}
	target := unlimited
	if mbo > 0 {
		derived := int(float64(p.BatchSize) * (st.UnallocatedFraction + minAlloc))
		target = mbo*derived/p.GroupSize - st.QueueSize
	}
	if p.MaxWorkers > 0 {
		target = min(target, p.MaxWorkers)
	}
	if p.MinBatchAllocation != nil && mbo > 0 {
		packs := ceilDiv(minAlloc*float64(p.BatchSize*mbo), float64(mg))
		own := math.Floor(float64(mg*st.SelfQueueSize) / (float64(mg) / float64(p.GroupSize)))
		fill := ceilDiv(float64((packs+mg/p.GroupSize)*mg)-own, float64(p.GroupSize))
		target = max(target, fill, 0)
	}
	d.Start = max(target-running, 0)
	return d
}

func ceilDiv(a, b float64) int {
	q := a / b
	n := int(q)
	if float64(n) < q {
		n++
	}
	return n
}

// params returns the pacing parameters of this client, or false before registration.
func (c *Client) params() (PacingParams, bool) {
	reg := c.Registration()
	if reg == nil {
		return PacingParams{}, false
	}
	total := c.cfg.TotalSteps
	if total == 0 {
		total = reg.NumSteps
	}
	return PacingParams{
		BatchSize: reg.BatchSize, GroupSize: c.cfg.GroupSize,
		MaxBatchesOffPolicy: c.cfg.MaxBatchesOffPolicy, TotalSteps: total,
		MinBatchAllocation: c.cfg.MinBatchAllocation, MaxWorkers: c.cfg.MaxWorkers,
	}, true
}

// Pace polls /status-env and applies BaseEnv's back-pressure rules to its answer, with
// running units of work in flight (mbo = MaxBatchesOffPolicy, bs = batch_size, gs = GroupSize, mgs = max_group_size;
// // is integer division, / real division):
//   - Stop when current_step + queue_size×gs // bs > TotalSteps.
//   - Pause when queue_size×gs >= mbo×bs (and, for an env with a minimum allocation,
//     its own queue already covers its reserved share: ceil(min×bs×mbo / mgs)×(mgs // gs)
//     − self_queue_size <= 0), or while the batch size is unknown.
//   - Start nothing more while MaxWorkers units run.
//   - Otherwise allow up to min(MaxWorkers, mbo×derived_batch_size // gs − queue_size)
//     units in flight, where derived_batch_size = int(bs×(unallocated_fraction + min
//     allocation)). For an env with a minimum allocation this is raised, as BaseEnv does,
//     to the refill of its reserved share, ceil(((ceil(min×bs×mbo / mgs) + mgs // gs)×mgs
//     − floor(mgs×self_queue_size / (mgs / gs))) / gs), which may exceed MaxWorkers.
//
// Two deliberate differences from BaseEnv: mbo <= 0 never pauses and sets no bound
// (BaseEnv's formula would then start no work at all), and in the pause rule mgs // gs
// counts as at least 1, so that an env with a reserved share and nothing queued does not
// pause while other envs fill the queue with smaller groups (BaseEnv would, and the API
// would then form no batch while the reserved env has nothing packable).
func (c *Client) Pace(ctx context.Context, running int) (Decision, EnvStatus, error) {
	p, ok := c.params()
	if !ok {
		return Decision{}, EnvStatus{}, ErrNotRegistered
	}
	st, err := c.Status(ctx)
	if err != nil {
		return Decision{}, st, err
	}
	return pace(st, p, running), st, nil
}

// Ready answers "may I start more work?" with one /status-env poll, taking no work to be
// in flight. It returns [ErrTotalStepsReached] once the stop rule holds.
func (c *Client) Ready(ctx context.Context) (bool, error) {
	d, _, err := c.Pace(ctx, 0)
	if err != nil {
		return false, err
	}
	if d.Stop {
		return false, ErrTotalStepsReached
	}
	return !d.Pause && d.Start > 0, nil
}

// WaitReady polls /status-env every StatusInterval until the env may start more work,
// the stop rule holds ([ErrTotalStepsReached]) or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		ok, err := c.Ready(ctx)
		if err != nil || ok {
			return err
		}
		if err := sleep(ctx, c.cfg.StatusInterval); err != nil {
			return err
		}
	}
}
