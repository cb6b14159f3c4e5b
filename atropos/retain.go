package atropos

import (
	"errors"
	"fmt"
	"slices"
)

// The API keeps its queue in memory and answers "received" as soon as a group is in
// it, so a group can be accepted and still be lost when the API restarts before the
// trainer pulled it. The client therefore keeps every accepted group in memory until
// /status-env shows it was served, and on a reset puts the groups not known to be
// served back in the spool.
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
	line           []byte // the group as posted; nil once served
	sendTick       uint64 // before the post that carried it
	replyTick      uint64 // after its reply
	out            bool   // known out of the queue
	outStep        int    // the step when it was seen out of the queue
	servedOrMissed bool
}

// tick returns the next value of the client's event clock.
func (c *Client) tick() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	return c.clock
}

// accepted records lines accepted by a post sent at sendTick under registration
// epoch. It returns errStaleRegistration when the client registered again meanwhile:
// the groups went out under the old id and must be posted again.
func (c *Client) accepted(epoch, sendTick uint64, lines [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return errStaleRegistration
	}
	c.clock++
	for _, l := range lines {
		c.retained = append(c.retained, &sent{line: l, sendTick: sendTick, replyTick: c.clock})
	}
	return nil
}

// errStaleRegistration: a post was accepted under a registration the client has since
// replaced; the caller posts again under the new one.
var errStaleRegistration = errors.New("atropos: posted under a registration that was replaced meanwhile")

// settle applies a /status-env reply from a poll that began at tick to the retained
// groups. Called with c.mu held.
func (c *Client) settle(st EnvStatus, tick uint64) {
	for _, a := range c.retained {
		if a.out && !a.servedOrMissed && st.CurrentStep > a.outStep {
			a.servedOrMissed, a.line = true, nil
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
		if !b.servedOrMissed {
			return false
		}
		for _, a := range c.retained {
			if !a.servedOrMissed && a.replyTick < b.sendTick {
				return false
			}
		}
		return true
	})
}

// Unserved returns how many groups the API accepted under the current registration
// that are not yet known to be served; they are sent again if the API loses the
// registration.
func (c *Client) Unserved() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.retained {
		if !s.servedOrMissed {
			n++
		}
	}
	return n
}

// respool writes the lines of the taken groups not known to be served into one spool
// file, so that the next Flush sends them again.
func (c *Client) respool(taken []*sent) error {
	var lines [][]byte
	for _, s := range taken {
		if !s.servedOrMissed {
			lines = append(lines, s.line)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	name, err := c.spoolWrite(lines)
	if err != nil {
		return fmt.Errorf("atropos: keeping the groups the lost registration had sent: %w", err)
	}
	c.release(name)
	c.api.logger.Warn("atropos: groups the lost API had accepted are spooled again", "groups", len(lines), "file", name)
	c.mu.Lock()
	c.resent += len(lines)
	c.mu.Unlock()
	return nil
}
