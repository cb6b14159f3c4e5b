package atropos

import (
	"errors"
	"os"
	"slices"
)

// The API keeps its queue in memory and answers "received" as soon as a group is in
// it, so a group can be accepted and still be lost when the API restarts before the
// trainer pulled it. The client therefore keeps every accepted group's spool file on
// disk until /status-env shows the group was served, and on a reset makes the groups
// not known to be served sendable again. A process that dies (with the API or not)
// leaves them in the spool, and the next process's Register sends them again.
//
// When is a group served? The API forms batches from its queue, taking this env's
// groups (all of one size) in the order they arrived, and forms new batches only once
// every batch formed earlier was served (it serves waiting batches first). So:
//   - a group is out of the queue once a poll shows self_queue_size = q and at least q
//     of this env's groups surely arrived after it (sent after its reply came back)
//     and before the poll (their reply came back before the poll began);
//   - a group out of the queue at step s is served once a later poll shows a step
//     above s: forming a batch after s means every earlier batch was served.
//
// A group of another size than the registered one (group_overrides.group_size) may sit
// in the API's buffer instead, where this rule does not see it; such groups are
// treated like the others.

// sent is one group the API accepted under the current registration.
type sent struct {
	file      string // the spool file that holds it until it is served
	sendTick  uint64 // before the post that carried it
	replyTick uint64 // after its reply
	queued    bool   // the API answered "received" for it: it went to the queue, no buffer
	out       bool   // known out of the queue
	outStep   int    // the step when it was seen out of the queue
	served    bool   // known served (or lost with a batch formed before a reset)
}

// heldFile is a spool file whose groups the API accepted under the current
// registration: Flush leaves it alone, and it is removed once they were all served.
type heldFile struct {
	unserved int // groups in the file accepted and not known served
}

// tick returns the next value of the client's event clock.
func (c *Client) tick() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	return c.clock
}

// accepted records that the API accepted the groups of spool file name (queued[i]: the
// reply was "received", not "buffered"), from a post sent at sendTick under
// registration epoch. It returns errStaleRegistration when the client registered again
// meanwhile: the groups went out under the old id and must be posted again.
func (c *Client) accepted(epoch, sendTick uint64, name string, queued []bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return errStaleRegistration
	}
	c.clock++
	h := c.held[name]
	if h == nil {
		h = &heldFile{}
		c.held[name] = h
	}
	for _, q := range queued {
		c.retained = append(c.retained, &sent{file: name, sendTick: sendTick, replyTick: c.clock, queued: q})
		h.unserved++
	}
	return nil
}

// errStaleRegistration: a post was accepted under a registration the client has since
// replaced; the caller posts again under the new one.
var errStaleRegistration = errors.New("atropos: posted under a registration that was replaced meanwhile")

// settle applies a /status-env reply from a poll that began at tick to the retained
// groups. It returns the spool files whose groups are all served now, for the caller
// to remove once c.mu is released. Called with c.mu held.
func (c *Client) settle(st EnvStatus, tick uint64) (done []string) {
	for _, a := range c.retained {
		if a.out && !a.served && st.CurrentStep > a.outStep {
			a.served = true
			if h := c.held[a.file]; h != nil {
				if h.unserved--; h.unserved == 0 {
					delete(c.held, a.file)
					done = append(done, a.file)
				}
			}
		}
	}
	for _, a := range c.retained {
		if a.out || a.replyTick >= tick {
			continue
		}
		later := 0
		for _, b := range c.retained {
			if b.sendTick > a.replyTick && b.replyTick < tick {
				later++
			}
		}
		if later >= st.SelfQueueSize {
			a.out, a.outStep = true, st.CurrentStep
		}
	}
	// A served group is forgotten once no unserved one was accepted before it was sent
	// (it can no longer count as arriving after one).
	c.retained = slices.DeleteFunc(c.retained, func(b *sent) bool {
		if !b.served {
			return false
		}
		for _, a := range c.retained {
			if !a.served && a.replyTick < b.sendTick {
				return false
			}
		}
		return true
	})
	return done
}

// removeServed removes spool files of groups that need no sending again. Called without c.mu.
func (c *Client) removeServed(names []string) {
	for _, n := range names {
		if err := os.Remove(c.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.api.logger.Warn("atropos: spool: removing a served file", "file", n, "err", err)
			continue
		}
		c.forgetName(n)
		c.mu.Lock()
		delete(c.free, n)
		c.mu.Unlock()
	}
}

// Unserved returns how many groups the API accepted under the current registration
// that are not yet known to be served; their spool files stay on disk, and they are
// sent again if the API loses the registration.
func (c *Client) Unserved() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.retained {
		if !s.served {
			n++
		}
	}
	return n
}

// respool makes the groups of the taken held files that are not known to be served
// sendable again: a file with such groups stays as it is (Flush sends it once it is no
// longer held), a file with none is removed. The groups of one file are posted together
// and so are seen out of the queue, and served, together: a file is never partly
// served, and were it so, its served groups would be sent again (at least once). A file
// keeps its count of posts (see the package doc).
func (c *Client) respool(taken []*sent, files map[string]*heldFile) {
	unserved := map[string]int{}
	for _, s := range taken {
		if !s.served {
			unserved[s.file]++
		}
	}
	n := 0
	var done []string
	for name := range files {
		if unserved[name] == 0 {
			done = append(done, name)
		}
		n += unserved[name]
	}
	c.removeServed(done)
	if n > 0 {
		c.api.logger.Warn("atropos: groups the lost API had accepted are spooled again", "groups", n, "files", len(files)-len(done))
	}
	c.mu.Lock()
	c.resent += n
	for name := range files {
		if unserved[name] > 0 {
			c.free[name] = true
		}
	}
	c.mu.Unlock()
}
