package atropos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// ErrWaitingForTrainer is matched by an error of [Client.Register], [Client.Status],
// [Client.Send] or [Client.Flush] when ctx ended while the API answered but had no
// started trainer: /info showed batch_size -1, or /register-env said "wait for trainer
// to start". The API is reachable; it is waiting for the trainer to register (again).
var ErrWaitingForTrainer = errors.New("atropos: waiting for a trainer to register with the API")

// ErrRegistrationLost is returned by [Client.Disconnect] when the API no longer holds
// this env's registration (it was restarted or reset): the env id may belong to another
// env now, so nothing is sent under it.
var ErrRegistrationLost = errors.New("atropos: the API lost this env's registration")

// regState is what the client knows of its registration.
type regState int

const (
	// regCurrent: no request has failed since the registration was made or verified.
	regCurrent regState = iota
	// regSuspect: a request failed; the API may have been restarted or reset.
	regSuspect
	// regLost: the API no longer holds the registration; register again.
	regLost
)

// statusMisses is how many verification rounds in a row must see /status-env fail with
// a 5xx for this env's id, while /info shows a trainer, before the id counts as gone.
// Upstream answers 500 for an unknown env id, as it does for any crash, so one failure
// proves nothing.
const statusMisses = 4

// noteFailure records that a request made under registration epoch failed with err. A
// refused connection means the API process was not running, so the API that answers
// next holds none of its old state; other failures make the registration suspect. 408
// and 429 (the API or a proxy is alive and asks to slow down) and 4xx replies change
// nothing.
func (c *Client) noteFailure(epoch uint64, err error) {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusOK {
		return
	}
	if errors.Is(err, errStaleRegistration) || errors.Is(err, errCopiesSpent) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg == nil || c.epoch != epoch || c.state == regLost {
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		c.lose("connection refused: the API process was down and lost its in-memory state")
		return
	}
	c.state = regSuspect
}

// lose marks the registration lost: the API was restarted or reset, so the earlier
// registrations files wait on are gone too. Called with c.mu held.
func (c *Client) lose(why string) {
	if c.state != regLost {
		c.api.logger.Warn("atropos: the API lost this env's registration; registering again", "env_id", c.reg.EnvID, "why", why)
	}
	c.state = regLost
	c.releaseAllPreds("the API lost this env's registration too: " + why)
}

// retire gives up the registration without knowing it lost: the process was paused
// (see [ClientConfig.PauseLimit]), so the id may be another env's by now. The groups
// accepted under it and not seen served wait until its queue shows they are no longer
// there (see the package doc); the client registers again before its next post. Called
// with c.mu held.
func (c *Client) retire(why string) {
	if c.reg == nil || c.state == regLost {
		return
	}
	c.api.logger.Warn("atropos: registering again before the next post: this env's id may be another env's after the pause", "env_id", c.reg.EnvID, "why", why)
	for _, s := range c.retained {
		if !s.served {
			c.await(c.reg.EnvID, s.file, 0)
			c.preds[c.reg.EnvID].files[s.file]++
			c.preds[c.reg.EnvID].groups++
		}
	}
	c.retained, c.held = nil, map[string]*heldFile{}
	c.epoch++
	c.state, c.retiring = regLost, true
}

// current returns the registration and its epoch when it is known to be current.
func (c *Client) current() (Registration, uint64, regState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg == nil {
		return Registration{}, 0, regCurrent, false
	}
	return *c.reg, c.epoch, c.state, true
}

// ensure returns a registration known to be current: after a failed request it
// verifies the registration, and when the API lost it, registers again (in the
// start-up order) and moves the groups the old API had accepted but may not have served
// back into the spool. Only one goroutine recovers at a time; the others wait for it.
func (c *Client) ensure(ctx context.Context) (Registration, uint64, error) {
	for {
		reg, epoch, st, ok := c.current()
		if !ok {
			return Registration{}, 0, ErrNotRegistered
		}
		if st == regCurrent {
			return reg, epoch, nil
		}
		select {
		case c.recovering <- struct{}{}:
		case <-ctx.Done():
			c.mu.Lock()
			waiting := c.waiting
			c.mu.Unlock()
			if waiting {
				return Registration{}, 0, fmt.Errorf("%w: %w", ErrWaitingForTrainer, ctx.Err())
			}
			return Registration{}, 0, ctx.Err()
		}
		err := c.recover(ctx)
		<-c.recovering
		if err != nil {
			return Registration{}, 0, err
		}
	}
}

// recover moves a suspect registration to current or lost, and a lost one to a new
// registration. Called by one goroutine at a time.
func (c *Client) recover(ctx context.Context) error {
	_, _, st, ok := c.current()
	switch {
	case !ok || st == regCurrent:
		return nil
	case st == regSuspect:
		return c.verify(ctx)
	}
	// A new epoch at once: a post the old API accepts from now on is posted again.
	c.mu.Lock()
	c.epoch++
	taken, files := c.retained, c.held
	c.retained, c.held = nil, map[string]*heldFile{}
	retired := c.retiring
	c.retiring = false
	c.mu.Unlock()
	c.respool(taken, files)
	reg, err := c.registerEnv(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.adopt(reg)
	if retired {
		c.retired++
	} else {
		c.resets++
	}
	c.mu.Unlock()
	c.api.logger.Info("atropos: registered again", "env_id", reg.EnvID, "wandb_name", reg.WandbName)
	return nil
}

// verify decides whether a suspect registration still stands. The rules, each a sign
// upstream's API gives of a restart or a /reset_data:
//   - /info shows batch_size -1: the trainer's registration is gone, and with it every
//     env's (lost);
//   - /info shows another batch size or max token length than at registration: a
//     trainer registered again with another configuration (lost);
//   - a connection was refused: the API process was not running (lost);
//   - /status-env answers with a current_step below the highest this registration saw,
//     to a poll begun after that step was seen: the step counter never goes back within
//     one API life (lost);
//   - /status-env fails with a 5xx for this env's id in statusMisses rounds in a row
//     while /info shows a trainer: the env list no longer reaches the id (lost);
//   - /info shows a trainer and /status-env answers with a step not below the last one
//     seen: the registration stands (current).
//
// Other failures repeat the round after a backoff, until ctx ends or, when
// Retry.MaxAttempts is set, for that many rounds.
func (c *Client) verify(ctx context.Context) error {
	misses := 0
	for round := 1; ; round++ {
		reg, epoch, st, ok := c.current()
		if !ok || st != regSuspect {
			return nil
		}
		var info Info
		err := c.once(ctx, func(ctx context.Context) error { return c.api.do(ctx, http.MethodGet, "/info", nil, &info) })
		if err == nil && info.BatchSize <= 0 {
			c.loseIf(epoch, "no trainer registered (/info batch_size -1)")
			return nil
		}
		if err == nil && (info.BatchSize != reg.BatchSize || info.MaxTokenLen != reg.MaxTokenLen) {
			// Both are set once per API life, by the trainer's first /register.
			c.loseIf(epoch, fmt.Sprintf("/info shows batch_size %d and max_token_len %d, not %d and %d as at registration: a trainer registered again",
				info.BatchSize, info.MaxTokenLen, reg.BatchSize, reg.MaxTokenLen))
			return nil
		}
		if err == nil {
			var es EnvStatus
			tick := c.tick()
			if !c.tried(epoch, c.cfg.Now()) {
				return nil // retired: registered again by the caller
			}
			err = c.once(ctx, func(ctx context.Context) error { return c.api.statusEnv(ctx, reg.EnvID, &es) })
			if err == nil {
				c.observe(epoch, es, tick)
				return nil
			}
			var ae *APIError
			if errors.As(err, &ae) && ae.Status >= 500 {
				if misses++; misses >= statusMisses {
					c.loseIf(epoch, fmt.Sprintf("/status-env failed %d times for env id %d while /info shows a trainer", misses, reg.EnvID))
					return nil
				}
			}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			c.loseIf(epoch, "connection refused: the API process was down and lost its in-memory state")
			return nil
		}
		if !retryable(ctx, err) {
			return err
		}
		if m := c.cfg.Retry.MaxAttempts; m > 0 && round >= m {
			return fmt.Errorf("atropos: verifying the registration: giving up after %d attempts: %w", round, err)
		}
		wait := backoff(c.cfg.Retry, round)
		c.api.logger.Debug("atropos: verifying the registration", "round", round, "err", err)
		if serr := sleep(ctx, wait); serr != nil {
			return fmt.Errorf("atropos: verifying the registration: %w (last error: %v)", serr, err)
		}
	}
}

func (c *Client) loseIf(epoch uint64, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg != nil && c.epoch == epoch {
		c.lose(why)
	}
}

// once runs one attempt of op, bounded by Retry.AttemptTimeout.
func (c *Client) once(ctx context.Context, op func(context.Context) error) error {
	if t := c.cfg.Retry.AttemptTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	return op(ctx)
}

// adopt makes reg the current registration; c.mu must be held. It starts a new epoch
// (a post or poll begun under an older one is stale) and the step it starts from.
func (c *Client) adopt(reg *Registration) {
	c.reg = reg
	c.epoch++
	c.state = regCurrent
	c.lastTry, c.pauseWhy = c.cfg.Now(), ""
	c.lastStep, c.lastStepTick = reg.StartingStep, c.clock
	c.posting, c.uncertain, c.oddSizes = 0, 0, false
}

// registerEnv runs the start-up order: it polls GET /info until a trainer registered,
// then POST /register-env until "success".
func (c *Client) registerEnv(ctx context.Context) (*Registration, error) {
	defer func() {
		c.mu.Lock()
		c.waiting = false
		c.mu.Unlock()
	}()
	reg, answered, err := c.registerEnvOnce(ctx)
	if err != nil && answered && ctx.Err() != nil && !errors.Is(err, ErrWaitingForTrainer) {
		// The API answered, so it is reachable: it is waiting for the trainer.
		err = fmt.Errorf("%w: %w", ErrWaitingForTrainer, err)
	}
	return reg, err
}

func (c *Client) registerEnvOnce(ctx context.Context) (_ *Registration, answered bool, _ error) {
	var info Info
	var waitStart waitLog
	for {
		err := c.retry(ctx, "GET /info", false, func(ctx context.Context, _ Registration, _ uint64) error {
			return c.api.do(ctx, http.MethodGet, "/info", nil, &info)
		})
		if err != nil {
			return nil, answered, err
		}
		if !answered {
			answered = true
			c.mu.Lock()
			c.waiting = true
			c.mu.Unlock()
		}
		if info.BatchSize > 0 {
			break
		}
		c.noteWaiting(&waitStart, "atropos: waiting for a trainer to register with the API (/info batch_size -1)")
		if err := sleep(ctx, c.cfg.PollInterval); err != nil {
			return nil, true, fmt.Errorf("%w: %w", ErrWaitingForTrainer, err)
		}
	}
	if c.cfg.GroupSize > info.BatchSize {
		return nil, true, fmt.Errorf("atropos: group size %d is larger than the trainer's batch size %d", c.cfg.GroupSize, info.BatchSize)
	}
	body := registerEnvRequest{
		MaxTokenLength:     c.cfg.MaxTokenLength,
		DesiredName:        c.cfg.EnvName,
		Weight:             c.cfg.Weight,
		GroupSize:          c.cfg.GroupSize,
		MinBatchAllocation: c.cfg.MinBatchAllocation,
	}
	var reply registerEnvReply
	for {
		reply = registerEnvReply{}
		err := c.retry(ctx, "POST /register-env", false, func(ctx context.Context, _ Registration, _ uint64) error {
			return c.api.postJSON(ctx, "/register-env", body, &reply)
		})
		if err != nil {
			return nil, true, err
		}
		if reply.Status == "success" && reply.EnvID != nil {
			break
		}
		c.noteWaiting(&waitStart, "atropos: waiting for the trainer's first /batch (/register-env: "+reply.Status+")")
		if err := sleep(ctx, c.cfg.PollInterval); err != nil {
			return nil, true, fmt.Errorf("%w: %w", ErrWaitingForTrainer, err)
		}
	}
	return &Registration{
		EnvID: *reply.EnvID, WandbName: reply.WandbName, CheckpointDir: reply.CheckpointDir,
		StartingStep: reply.StartingStep, CheckpointInterval: reply.CheckpointInterval,
		NumSteps: reply.NumSteps, BatchSize: info.BatchSize, MaxTokenLen: info.MaxTokenLen,
	}, true, nil
}

// Resets returns how many times the client found that the API had lost its
// registration and registered again.
func (c *Client) Resets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resets
}

// Resent returns how many groups the API had accepted under a registration it then
// lost, before they were known to be served, and that were therefore put back in the
// spool to be sent again. Each of them was either lost with the old API's queue or
// already in the trainer's hands (then the trainer sees it twice); the API does not
// say which.
func (c *Client) Resent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resent
}

// waitLogEvery is how often a wait for the trainer is logged at info level.
const waitLogEvery = time.Minute

// waitLog is one wait for the trainer, as logged.
type waitLog struct{ start, logged time.Time }

// noteWaiting logs a wait for the trainer at info level when it begins and every
// waitLogEvery after, with how long it has lasted, and at debug level otherwise.
func (c *Client) noteWaiting(w *waitLog, msg string) {
	now := time.Now()
	switch {
	case w.start.IsZero():
		w.start, w.logged = now, now
		c.api.logger.Info(msg, "url", c.api.base.String())
	case now.Sub(w.logged) >= waitLogEvery:
		w.logged = now
		c.api.logger.Info(msg, "url", c.api.base.String(), "waited", now.Sub(w.start).Round(time.Second))
	default:
		c.api.logger.Debug(msg, "waited", now.Sub(w.start))
	}
}
