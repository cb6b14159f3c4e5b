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
// groups the API had accepted were served, and sends them again; and the API never says
// which of the groups it took it served. Two rules bound that:
//
//   - Each spool file's name counts the posts of its groups the API took or may have
//     taken, and the env id of the last (base.a<n>e<env>.jsonl): the file is renamed
//     durably before each post, and back after a post the API surely did not take (a
//     refused connection, a 4xx, a 500, a 501 or a 503, or a status poll right after a
//     failed post that shows the queue without it). A file posted MaxCopies times (2 by
//     default) that way is never posted again: should it become sendable again (the API
//     that took the last copy lost it, a later process finds it, or the last post failed
//     in a way that does not rule out that the API took it), it goes to the dead-letter
//     file instead, with why, so that no group reaches the trainer more than MaxCopies
//     times and none is dropped unseen.
//   - A copy is never posted while an earlier one may still wait in an API's queue, so
//     that two copies never land in one batch. A group accepted under a registration
//     that is no longer this client's (an earlier process's, or one this client retired
//     after a pause) is sent again only once that id's queue shows none of them can
//     still be there: self_queue_size 0 (within one API life nothing is
//     posted under a dead registration, so its queue only shrinks), or a queue that grew
//     or holds more than the old registration had, a current_step that went back, the id
//     failing with a 5xx statusMisses times, the id equal to this client's own current
//     one, or this client's own registration lost: each shows the API was restarted or
//     reset, and the old copies went with it.
//
// So a process that dies, alone or with the API, and the next one that sends its groups
// again, give each group at most two copies at the trainer; a group whose second copy
// was lost with an API goes to the dead-letter file, where the operator sees it (it may
// be in the trainer's hands once already). A post that fails while the process lives
// after the API may have taken it (a dropped connection, a garbled reply) is retried at
// once, and counted: then two copies may meet in one queue, and a third attempt is not
// made.

// errCopiesSpent stops the retries of a post whose file was posted MaxCopies times
// already, within this process: the file goes to the dead-letter file instead.
var errCopiesSpent = errors.New("atropos: the API may hold as many copies of these groups as ClientConfig.MaxCopies allows")

// spoolEntry is a spool file: its base name and what its name records.
type spoolEntry struct {
	base   string // the name without extension or marks: stamp-seq
	copies int    // posts of its groups the API may have taken
	env    int    // the env id of the last of them (when copies > 0)
}

// name returns the file name of e.
func (e spoolEntry) name() string {
	if e.copies == 0 {
		return e.base + spoolExt
	}
	return fmt.Sprintf("%s.a%de%d%s", e.base, e.copies, e.env, spoolExt)
}

// parseSpoolName reads a spool file name; ok is false for other files.
func parseSpoolName(n string) (e spoolEntry, ok bool) {
	rest, found := strings.CutSuffix(n, spoolExt)
	if !found || strings.HasPrefix(n, ".") || rest == "" {
		return e, false
	}
	base, mark, hasMark := strings.Cut(rest, ".")
	e.base = base
	if !hasMark {
		return e, true
	}
	mark, ok = strings.CutPrefix(mark, "a")
	if !ok {
		return e, false
	}
	a, env, found := strings.Cut(mark, "e")
	if !found {
		return e, false
	}
	var err1, err2 error
	e.copies, err1 = strconv.Atoi(a)
	e.env, err2 = strconv.Atoi(env)
	if err1 != nil || err2 != nil || e.copies < 1 || e.env < 0 {
		return e, false
	}
	return e, true
}

// entry returns what the client knows of spool file base. Called with c.nameMu held.
func (c *Client) entry(base string) spoolEntry {
	if e, ok := c.names[base]; ok {
		return e
	}
	return spoolEntry{base: base}
}

// path returns the current path of spool file base.
func (c *Client) path(base string) string {
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	return filepath.Join(c.cfg.SpoolDir, c.entry(base).name())
}

// setCopies renames spool file base to next, durably (the directory is synced). A
// file that is gone was settled meanwhile.
func (c *Client) setCopies(base string, next spoolEntry) error {
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	old := c.entry(base)
	next.base = base
	if next.copies <= 0 {
		next.copies, next.env = 0, 0
	}
	if next == old {
		return nil
	}
	dir := c.cfg.SpoolDir
	if err := os.Rename(filepath.Join(dir, old.name()), filepath.Join(dir, next.name())); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			delete(c.names, base)
			return nil
		}
		return fmt.Errorf("atropos: spool: recording a post of %s: %w", base, err)
	}
	c.names[base] = next
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("atropos: spool: recording a post of %s: %w", base, err)
	}
	return nil
}

// countPost records durably, before a post of spool file base under env id env, that
// the API may take one more copy; it returns what the name said before, for undo.
func (c *Client) countPost(base string, env int) (spoolEntry, error) {
	c.nameMu.Lock()
	before := c.entry(base)
	c.nameMu.Unlock()
	return before, c.setCopies(base, spoolEntry{copies: before.copies + 1, env: env})
}

// copiesOf returns how many posts of spool file base the API may have taken.
func (c *Client) copiesOf(base string) int {
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	return c.entry(base).copies
}

// forgetName drops what the client knows of base's name once the file is gone.
func (c *Client) forgetName(base string) {
	c.nameMu.Lock()
	delete(c.names, base)
	c.nameMu.Unlock()
}

// abandon moves the groups of spool file base, posted MaxCopies times already, to the
// dead-letter file instead of posting them again.
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
		"not sent again: the API may have taken %d copies of this group (the last under env id %d), and this env has not seen it served: "+
			"its registration was lost, its process died, or the posts failed in ways that do not rule out that the API took them. "+
			"The trainer may have it up to %d times, or not at all (the API does not say); it is kept here instead of being posted again (ClientConfig.MaxCopies is %d)",
		e.copies, e.env, e.copies, c.cfg.MaxCopies)}
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
	delete(c.free, base)
	c.mu.Unlock()
	return fmt.Errorf("%w: spool file %s: %s", ErrAbandoned, base, why.Message)
}

// Waiting returns how many groups in the spool wait until the queue of the earlier
// registration that accepted them shows they can no longer be there (see the package
// doc). [Client.Status] polls those registrations at most every StatusInterval, and
// [Client.Flush] sends what they released ([Client.Resent] grows); Serve does both.
func (c *Client) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.preds {
		n += p.groups
	}
	return n
}

// Abandoned returns how many groups were moved to the dead-letter file instead of being
// posted a third time (see the package doc).
func (c *Client) Abandoned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned
}

// Retired returns how many registrations the client gave up, without the API having
// lost them, because the process was paused (see [ClientConfig.PauseLimit]), and
// registered again.
func (c *Client) Retired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retired
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

// releasePred makes the files waiting on env id env sendable. Called with c.mu held.
func (c *Client) releasePred(env int, why string) {
	p := c.preds[env]
	if p == nil {
		return
	}
	delete(c.preds, env)
	for base := range p.files {
		c.free[base] = true
	}
	c.resent += p.groups
	c.api.logger.Info("atropos: groups an earlier registration had accepted are sent again", "env_id", env, "groups", p.groups, "why", why)
}

// releaseAllPreds makes every waiting file sendable: the API lost this client's
// registration, so it lost the older ones too. Called with c.mu held.
func (c *Client) releaseAllPreds(why string) {
	for env := range c.preds {
		c.releasePred(env, why)
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
// releases those whose queue shows none of their groups can still be there. An env id
// names a registration only within one API life, and a post counted as a copy may not
// have reached the API at all, so nothing proves that the API holds a given file's
// groups: they are always sent again, once they cannot meet an earlier copy in a queue.
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
			c.releasePred(env, "this env holds the id now: the API was restarted since")
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
			case st.SelfQueueSize > p.groups:
				c.releasePred(env, fmt.Sprintf("self_queue_size %d is more than the %d groups it had: the id is another env's", st.SelfQueueSize, p.groups))
			case p.lastQ >= 0 && st.SelfQueueSize > p.lastQ:
				c.releasePred(env, fmt.Sprintf("its queue grew from %d to %d: the id is another env's", p.lastQ, st.SelfQueueSize))
			case st.CurrentStep < p.step:
				c.releasePred(env, fmt.Sprintf("current_step went back from %d to %d", p.step, st.CurrentStep))
			case st.SelfQueueSize == 0:
				c.releasePred(env, "none of its groups is queued any more")
			default:
				p.lastQ, p.step = st.SelfQueueSize, max(p.step, st.CurrentStep)
			}
		case errors.As(err, &ae) && ae.Status >= 500:
			if p.misses++; p.misses >= statusMisses {
				c.releasePred(env, fmt.Sprintf("/status-env failed %d times for the id", p.misses))
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
