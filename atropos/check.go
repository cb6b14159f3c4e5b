package atropos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The checks that guard a post. Two things can make a check wrong: its answer may be
// old (it came from an API process that has died since), and an API that was restarted
// may answer for this env's id although the id is now another env's.
//
// Age: every post and disconnect is preceded by a /status-env check sent at most
// MaxCheckAge before the post goes out, on the monotonic clock; an older one is made
// again. The answer may have been computed by the API at any moment after the check was
// sent, so its age counts from then. When every check comes back older than that (each
// round trip takes longer), the limit doubles every three checks in a row, up to 64 ×
// MaxCheckAge, with a warning: posts go on, and the bound is then the round trip.
//
// Another env's answer: within one API life, the queue holds under this env's id only
// the groups this env posted, and a group leaves the queue only when a batch forms,
// which moves current_step. So a reply shows a restart when its self_queue_size is
//   - above what this env can have there: its accepted groups not known out of the
//     queue, plus its posts in flight or failed (a failed post may have been taken);
//   - below what it must have there: at the step it saw when it last saw the step move
//     (or registered), every group it posted after that and saw "received" for before
//     the poll began is still queued while the step has not moved.
//
// Both need a reply whose poll overlapped no other reply (so that what the client
// knows matches what the API saw) and groups all of the registered size (the API counts
// sequences divided by the largest group size).

// observe takes a /status-env reply for registration epoch, from a poll that began at
// tick: a reply that shows a restart (a step below the highest seen, a queue that does
// not match what this env sent) loses the registration; otherwise the registration is
// current, and the accepted groups the reply shows served are settled (their spool
// files removed). It reports whether the reply is this env's.
func (c *Client) observe(epoch uint64, st EnvStatus, tick uint64) bool {
	c.mu.Lock()
	ok, done := c.observeLocked(epoch, st, tick)
	c.mu.Unlock()
	c.removeServed(done)
	return ok
}

func (c *Client) observeLocked(epoch uint64, st EnvStatus, tick uint64) (bool, []string) {
	if c.reg == nil || c.epoch != epoch || c.state == regLost {
		return false, nil
	}

	alone := c.lastObserve < tick // no other reply was taken while this poll was out
	c.clock++
	c.lastObserve = c.clock
	if st.CurrentStep < c.lastStep && tick > c.lastStepTick {
		c.lose(fmt.Sprintf("current_step went back from %d to %d", c.lastStep, st.CurrentStep))
		return false, nil
	}
	if alone && !c.oddSizes {
		if why := c.queueMismatch(st, tick); why != "" {
			c.lose(why)
			return false, nil
		}
	}
	if st.CurrentStep > c.lastStep {
		// Only a poll begun after this reply arrived can show the step going back:
		// replies of polls that overlapped may arrive in any order.
		c.lastStep, c.lastStepTick = st.CurrentStep, c.clock
	}
	c.state = regCurrent
	return true, c.settle(st, tick)
}

// queueMismatch returns why a reply's self_queue_size cannot be this env's, or "".
// Called with c.mu held.
func (c *Client) queueMismatch(st EnvStatus, tick uint64) string {
	possible, surely := c.posting+c.uncertain, 0
	sameStep := st.CurrentStep == c.lastStep
	for _, s := range c.retained {
		if s.out {
			continue
		}
		possible++
		if sameStep && s.queued && s.sendTick > c.lastStepTick && s.replyTick < tick {
			surely++
		}
	}
	switch {
	case st.SelfQueueSize > possible:
		return fmt.Sprintf("self_queue_size %d: more groups queued under env id %d than this env can have there (%d); the id is another env's",
			st.SelfQueueSize, c.reg.EnvID, possible)
	case st.SelfQueueSize < surely:
		return fmt.Sprintf("self_queue_size %d at step %d: fewer than the %d groups this env sent since that step, which no batch took; the API lost its queue",
			st.SelfQueueSize, st.CurrentStep, surely)
	}
	return ""
}

// beginPost counts n groups as in flight under registration epoch; odd tells that some
// are not of the registered size.
func (c *Client) beginPost(epoch uint64, n int, odd bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch == epoch {
		c.posting += n
		c.oddSizes = c.oddSizes || odd
	}
}

// endPost counts n groups of epoch as no longer in flight; maybeTaken tells that the
// post failed in a way that may still have queued them.
func (c *Client) endPost(epoch uint64, n int, maybeTaken bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch == epoch {
		c.posting -= n
		if maybeTaken {
			c.uncertain += n
		}
	}
}

// checksPerDoubling is how many checks in a row, each older than its limit when it
// returns, double the limit: a post must go out even when every status round trip
// takes longer than MaxCheckAge (a loaded API, a slow link), and the best bound there
// is the round trip itself.
const checksPerDoubling = 3

// maxCheckAgeDoublings caps the widening at 64 × MaxCheckAge (32 s by default).
const maxCheckAgeDoublings = 6

// errChecksTooSlow: every status check came back older than the widest limit.
var errChecksTooSlow = errors.New("atropos: every /status-env check came back older than 64 × MaxCheckAge: the API answers too slowly to post safely (raise ClientConfig.MaxCheckAge)")

// checkLimit is the age a status check may have now: MaxCheckAge doubled as many
// times as the checks lately needed. Called with c.mu held.
func (c *Client) checkLimit() time.Duration {
	return c.cfg.MaxCheckAge << c.checkLevel
}

// StatusCheckLimit returns the age a /status-env check may have when the next post goes
// out: MaxCheckAge, doubled as often as slow round trips lately needed (see
// [ClientConfig.MaxCheckAge]). A caller bounding a Send or a Disconnect by a deadline
// should leave it a few times this.
func (c *Client) StatusCheckLimit() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLimit()
}

// pauseLimit is how long the client may go without a reply before it takes itself for
// paused. Called with c.mu held.
func (c *Client) pauseLimit() time.Duration {
	return max(c.cfg.PauseLimit, 4*c.checkLimit())
}

// tried records that a request under registration epoch begins now (by the clock).
// When the process was paused since the last request, the registration is retired (see
// [Client.retire]) and tried reports false; the caller sends nothing under it.
//
// A paused process and one waiting on a slow API both see a long gap between requests;
// a heartbeat tells them apart. While requests under the registration keep coming, a
// timer beats every tenth of the pause limit on the real clock. A beat that comes more
// than the limit after the one before (a timer fires late after a SIGCONT, or on a
// machine that ran nothing of the process's for that long), or a beat overdue by more
// than the limit when a request begins, shows that the whole process stood still; a
// slow reply does not stop the beats. Once no request was in flight, and none began or
// ended, for the limit (an idle client), the beats stop, and the gap between requests decides: a client that posts
// rarely registers again after such a gap (see [ClientConfig.PauseLimit]). Either way,
// a wall clock that moved more than a second apart from the monotonic one shows a
// suspended machine or a clock that was set.
func (c *Client) tried(epoch uint64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg == nil || c.epoch != epoch || c.state == regLost {
		return true // stale anyway: the caller's reply is dropped
	}
	limit := c.pauseLimit()
	if !c.lastTry.IsZero() {
		why := c.pauseWhy
		gap := now.Sub(c.lastTry)
		switch {
		case why != "":
		case c.beating:
			if late := time.Since(c.lastBeat); late > limit {
				why = fmt.Sprintf("the process stood still for %v (limit %v): it was paused", late.Round(time.Millisecond), limit)
			}
		case gap > limit:
			why = fmt.Sprintf("no request for %v (limit %v): the process was paused, or idle", gap.Round(time.Millisecond), limit)
		}
		if skew := now.Round(0).Sub(c.lastTry.Round(0)) - gap; why == "" && (skew > time.Second || skew < -time.Second) {
			why = fmt.Sprintf("the wall clock moved %v apart from the monotonic one since the last request: the machine was suspended or its clock set", skew.Round(time.Millisecond))
		}
		if why != "" {
			c.pauseWhy = ""
			c.retire(why)
			return false
		}
	}
	if now.After(c.lastTry) {
		c.lastTry = now
	}
	c.lastTryReal = time.Now()
	if !c.beating {
		c.beating, c.lastBeat = true, time.Now()
		if c.beatTimer == nil {
			c.beatTimer = time.AfterFunc(limit/10, c.beat)
		} else {
			c.beatTimer.Reset(limit / 10)
		}
	}
	return true
}

// beat is the heartbeat's timer (see [Client.tried]).
func (c *Client) beat() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.pauseLimit()
	if late := now.Sub(c.lastBeat); late > limit && c.pauseWhy == "" {
		c.pauseWhy = fmt.Sprintf("the process stood still for %v (limit %v): it was paused", late.Round(time.Millisecond), limit)
	}
	c.lastBeat = now
	last := c.lastTryReal
	if end := time.Unix(0, c.api.lastEnd.Load()); end.After(last) {
		last = end
	}
	idle := c.api.active.Load() == 0 && now.Sub(last) > limit
	if c.reg == nil || c.state == regLost || idle {
		c.beating = false // idle, or nothing to guard: the gap between requests decides
		return
	}
	c.beatTimer.Reset(limit / 10)
}

// freshCheck makes the /status-env check that guards a post under registration reg
// (epoch), again until one is younger than its limit when it returns. The limit is
// learned across posts: it doubles after checksPerDoubling checks in a row came back
// too old (up to 64 × MaxCheckAge) and halves after each check younger than half of it,
// so that a slow API costs one check per post once learned, not a climb every time.
// Once checks come back too old at the widest limit checksPerDoubling times in a row,
// it gives up with errChecksTooSlow (the post is retried with backoff). It returns
// errStaleRegistration when the reply shows that the API lost the registration.
func (c *Client) freshCheck(ctx context.Context, envID int, epoch uint64) error {
	for n := 1; ; n++ {
		start := c.cfg.Now()
		var st EnvStatus
		tick := c.tick()
		if !c.tried(epoch, start) {
			return errStaleRegistration
		}
		if err := c.api.statusEnv(ctx, envID, &st); err != nil {
			return err
		}
		if !c.observe(epoch, st, tick) {
			return errStaleRegistration
		}
		age := c.cfg.Now().Sub(start)
		c.mu.Lock()
		limit, level := c.checkLimit(), c.checkLevel
		fresh := age <= limit
		giveUp := false
		switch {
		case fresh:
			c.tooOld = 0
			if c.checkLevel > 0 && age <= limit/2 {
				c.checkLevel--
			}
		default:
			c.tooOld++
			if c.tooOld >= checksPerDoubling {
				c.tooOld = 0
				if c.checkLevel < maxCheckAgeDoublings {
					c.checkLevel++
				} else {
					giveUp = true
				}
			}
		}
		c.mu.Unlock()
		if fresh {
			if level > 0 {
				c.api.logger.Warn("atropos: posting on a status check older than MaxCheckAge: the round trips take longer",
					"age", age, "max", c.cfg.MaxCheckAge, "limit", limit)
			}
			return nil
		}
		if giveUp {
			return errChecksTooSlow
		}
		c.api.logger.Debug("atropos: the status check is older than its limit; checking again", "age", age, "limit", limit, "checks", n)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
