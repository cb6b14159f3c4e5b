package atropos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// How many copies of a group reach the trainer. A group can reach the API more than once:
// a process that died (or was paused, or lost its registration) cannot know whether the
// groups the API had accepted were served, and sends them again. Two rules bound that:
//
//   - Each spool file's name records how many copies of its groups were seen out of an
//     API's queue (taken into a batch: they may have reached the trainer) and, while a
//     copy is accepted and not yet seen out, the env id it was accepted under:
//     base.o<out>p<env>.jsonl, renamed durably when either changes. A copy that was still
//     queued when its API lost it never reached the trainer and is not counted. A file
//     with two copies seen out is never posted again: should it become sendable, it goes
//     to the dead-letter file instead, with why, so that no group reaches the trainer
//     more than twice and none is dropped unseen.
//   - A group accepted under a registration that is no longer this client's (an earlier
//     process's, or one this client retired after a pause) is not sent again while its
//     copy may still be queued under that registration, so that two copies never wait in
//     one queue and never land in one batch. The client polls /status-env for the old env
//     id and sends the groups again once that id's queue shows none of them can still be
//     there: self_queue_size 0 (within one API life nothing is posted under a dead
//     registration, so its queue only shrinks as batches take its groups: they count as
//     seen out), or a queue that grew or holds more than the old registration accepted,
//     a current_step that went back, the id failing with a 5xx statusMisses times, the id
//     equal to this client's own current one, or this client's own registration lost:
//     each shows the API was restarted or reset, and the old copies went with it.
//
// What the spool cannot know: a copy taken into a batch after the process's last status
// reply and before it died is recorded as still queued; and a process killed between an
// accepted post's reply and the rename does not record that copy. The bound counts the
// copies the spool saw; with Serve's 100 ms polls these windows are one poll wide.

// maxCopies is how many copies of a group may have been taken into batches before the
// group is no longer posted.
const maxCopies = 2

// spoolEntry is a spool file: its base name and what its name records.
type spoolEntry struct {
	base    string // the name without extension or marks: stamp-seq
	out     int    // copies seen out of an API's queue
	pending int    // the env id of a copy accepted and not seen out; -1: none
}

// name returns the file name of e.
func (e spoolEntry) name() string {
	switch {
	case e.out == 0 && e.pending < 0:
		return e.base + spoolExt
	case e.pending < 0:
		return fmt.Sprintf("%s.o%d%s", e.base, e.out, spoolExt)
	}
	return fmt.Sprintf("%s.o%dp%d%s", e.base, e.out, e.pending, spoolExt)
}

// parseSpoolName reads a spool file name; ok is false for other files.
func parseSpoolName(n string) (e spoolEntry, ok bool) {
	rest, found := strings.CutSuffix(n, spoolExt)
	if !found || strings.HasPrefix(n, ".") || rest == "" {
		return e, false
	}
	base, mark, hasMark := strings.Cut(rest, ".")
	e.base, e.pending = base, -1
	if !hasMark {
		return e, true
	}
	mark, ok = strings.CutPrefix(mark, "o")
	if !ok {
		return e, false
	}
	out, pending, hasPending := strings.Cut(mark, "p")
	var err error
	if e.out, err = strconv.Atoi(out); err != nil || e.out < 0 {
		return e, false
	}
	if hasPending {
		if e.pending, err = strconv.Atoi(pending); err != nil || e.pending < 0 {
			return e, false
		}
	}
	return e, true
}

// entry returns what the client knows of spool file base. Called with c.nameMu held.
func (c *Client) entry(base string) spoolEntry {
	if e, ok := c.names[base]; ok {
		return e
	}
	return spoolEntry{base: base, pending: -1}
}

// path returns the current path of spool file base.
func (c *Client) path(base string) string {
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	return filepath.Join(c.cfg.SpoolDir, c.entry(base).name())
}

// remark renames spool file base to what change makes of its entry, durably (the
// directory is synced). A file that is gone was settled meanwhile.
func (c *Client) remark(base string, change func(*spoolEntry)) {
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	old := c.entry(base)
	next := old
	change(&next)
	if next == old {
		return
	}
	dir := c.cfg.SpoolDir
	err := os.Rename(filepath.Join(dir, old.name()), filepath.Join(dir, next.name()))
	if errors.Is(err, os.ErrNotExist) {
		delete(c.names, base)
		return
	}
	if err == nil {
		c.names[base] = next
		err = syncDir(dir)
	}
	if err != nil {
		c.api.logger.Warn("atropos: spool: recording what became of a file's copies", "file", base, "err", err)
	}
}

// acceptedUnder records that the API accepted the groups of spool file base under env
// id env.
func (c *Client) acceptedUnder(base string, env int) {
	c.remark(base, func(e *spoolEntry) { e.pending = env })
}

// seenOut records that the pending copy of spool file base left the queue.
func (c *Client) seenOut(base string) {
	c.remark(base, func(e *spoolEntry) {
		if e.pending >= 0 {
			e.out, e.pending = e.out+1, -1
		}
	})
}

// copyLost records that the pending copy of spool file base went with an API that lost
// it while it was queued.
func (c *Client) copyLost(base string) {
	c.remark(base, func(e *spoolEntry) { e.pending = -1 })
}

// forgetName drops what the client knows of base's name once the file is gone.
func (c *Client) forgetName(base string) {
	c.nameMu.Lock()
	delete(c.names, base)
	c.nameMu.Unlock()
}

// abandon moves the groups of spool file base, maxCopies of whose copies were taken
// into batches, to the dead-letter file instead of posting them again.
func (c *Client) abandon(base string, e spoolEntry) error {
	path := c.path(base)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSpooled, err)
	}
	why := &APIError{Method: http.MethodPost, Path: "/scored_data", Status: 0, Message: fmt.Sprintf(
		"not sent again: %d copies of this group were taken into batches by APIs that then lost them or this env's registration before it was seen served; "+
			"the trainer may have it once or twice, or not at all (the API does not say). It is kept here, not posted again, so that no trainer gets it more than twice",
		e.out)}
	n := 0
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := c.deadLetter(line, why); err != nil {
			return fmt.Errorf("%w: writing the dead letter: %w", ErrSpooled, err)
		}
		n++
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrSpooled, err)
	}
	c.forgetName(base)
	c.mu.Lock()
	c.abandoned += n
	c.mu.Unlock()
	return fmt.Errorf("%w: spool file %s: %s", ErrRejected, base, why.Message)
}

// Abandoned returns how many groups were moved to the dead-letter file instead of being
// posted a third time (see the package doc).
func (c *Client) Abandoned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned
}

// pred is a registration that is no longer this client's, with the spool files whose
// groups it accepted and that wait until its queue shows none of them can be there.
type pred struct {
	files  map[string]int // base -> groups
	groups int            // in all
	lastQ  int            // its self_queue_size at the last poll; -1 before one
	step   int            // the highest current_step seen for it
	misses int            // 5xx replies in a row
}

// await puts the groups of spool file base (n of them), accepted under env id env by a
// registration that is not this client's current one, aside until that id's queue
// shows none of them can be there. Called with c.mu held.
func (c *Client) await(env int, base string, n int) {
	p := c.preds[env]
	if p == nil {
		p = &pred{files: map[string]int{}, lastQ: -1}
		c.preds[env] = p
	}
	if _, ok := p.files[base]; !ok {
		p.files[base] = n // -1: counted by fillPredCounts
		p.groups += max(n, 0)
	}
}

// fillPredCounts counts the groups of waiting files listed without a count.
func (c *Client) fillPredCounts() {
	type todo struct {
		env  int
		base string
	}
	var list []todo
	c.mu.Lock()
	for env, p := range c.preds {
		for base, n := range p.files {
			if n < 0 {
				list = append(list, todo{env, base})
			}
		}
	}
	c.mu.Unlock()
	for _, t := range list {
		n := c.countLines(t.base)
		c.mu.Lock()
		if p := c.preds[t.env]; p != nil && p.files[t.base] < 0 {
			p.files[t.base] = n
			p.groups += n
		}
		c.mu.Unlock()
	}
}

// releasePred makes the files waiting on env id env sendable; out tells that their
// copies left the queue (and may have reached the trainer) rather than went with a
// restarted API. The renames are made by applyReleases. Called with c.mu held.
func (c *Client) releasePred(env int, out bool, why string) {
	p := c.preds[env]
	if p == nil {
		return
	}
	delete(c.preds, env)
	for base := range p.files {
		c.free[base] = out
	}
	c.resent += p.groups
	c.api.logger.Info("atropos: groups an earlier registration had accepted are sent again", "env_id", env, "groups", p.groups, "why", why)
}

// releaseAllPreds makes every waiting file sendable: the API lost this client's
// registration, so it lost the older ones too. Called with c.mu held.
func (c *Client) releaseAllPreds(why string) {
	for env, p := range c.preds {
		// Some of its groups may have left the queue before the API lost them: counted
		// as seen out, so that the bound holds.
		c.releasePred(env, p.lastQ >= 0 && p.lastQ < p.groups, why)
	}
}

// applyReleases renames the files released from earlier registrations: their pending
// copy is seen out or lost, so Flush may send them.
func (c *Client) applyReleases() {
	c.mu.Lock()
	free := c.free
	c.free = map[string]bool{}
	c.mu.Unlock()
	for base, out := range free {
		if out {
			c.seenOut(base)
		} else {
			c.copyLost(base)
		}
	}
}

// waiting reports whether spool file base waits on an earlier registration. Called
// with c.mu held.
func (c *Client) waitingOnPred(base string) bool {
	for _, p := range c.preds {
		if _, ok := p.files[base]; ok {
			return true
		}
	}
	return false
}

// checkPreds polls /status-env once for each earlier registration files wait on, and
// releases those whose queue shows none of their groups can still be there.
func (c *Client) checkPreds(ctx context.Context) {
	c.mu.Lock()
	reg := c.reg
	var envs []int
	for env := range c.preds {
		envs = append(envs, env)
	}
	c.mu.Unlock()
	for _, env := range envs {
		if reg != nil && env == reg.EnvID {
			c.mu.Lock()
			c.releasePred(env, false, "this env holds the id now: the API was restarted since")
			c.mu.Unlock()
			continue
		}
		var st EnvStatus
		err := c.once(ctx, func(ctx context.Context) error { return c.api.statusEnv(ctx, env, &st) })
		var ae *APIError
		c.mu.Lock()
		p := c.preds[env]
		switch {
		case p == nil:
		case err == nil:
			p.misses = 0
			switch {
			case st.SelfQueueSize == 0:
				c.releasePred(env, true, "none of its groups is queued any more")
			case st.SelfQueueSize > p.groups:
				c.releasePred(env, p.lastQ >= 0 && p.lastQ < p.groups, fmt.Sprintf("self_queue_size %d is more than the %d groups it had: the id is another env's", st.SelfQueueSize, p.groups))
			case p.lastQ >= 0 && st.SelfQueueSize > p.lastQ:
				c.releasePred(env, p.lastQ < p.groups, fmt.Sprintf("its queue grew from %d to %d: the id is another env's", p.lastQ, st.SelfQueueSize))
			case st.CurrentStep < p.step:
				c.releasePred(env, p.lastQ >= 0 && p.lastQ < p.groups, fmt.Sprintf("current_step went back from %d to %d", p.step, st.CurrentStep))
			default:
				p.lastQ, p.step = st.SelfQueueSize, max(p.step, st.CurrentStep)
			}
		case errors.As(err, &ae) && ae.Status >= 500:
			if p.misses++; p.misses >= statusMisses {
				c.releasePred(env, p.lastQ >= 0 && p.lastQ < p.groups, fmt.Sprintf("/status-env failed %d times for the id", p.misses))
			}
		}
		c.mu.Unlock()
		if err != nil && ctx.Err() != nil {
			return
		}
	}
}

// maybeCheckPreds runs checkPreds when files wait on earlier registrations and the
// last round is at least StatusInterval old.
func (c *Client) maybeCheckPreds(ctx context.Context) {
	now := c.cfg.Now()
	c.mu.Lock()
	due := len(c.preds) > 0 && now.Sub(c.predPoll) >= c.cfg.StatusInterval
	if due {
		c.predPoll = now
	}
	c.mu.Unlock()
	if due {
		c.fillPredCounts()
		c.checkPreds(ctx)
	}
}

// countLines returns the number of non-empty lines in spool file base.
func (c *Client) countLines(base string) int {
	data, err := os.ReadFile(c.path(base))
	if err != nil {
		return 1
	}
	n := 0
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) > 0 {
			n++
		}
	}
	return max(n, 1)
}
