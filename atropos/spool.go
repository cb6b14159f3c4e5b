package atropos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrSpooled is matched by a [Client.Send] or [Client.Flush] error when the groups were
// not delivered yet but are safe in the spool: the next Flush (or the next process's
// Register) sends them.
var ErrSpooled = errors.New("atropos: groups kept in the spool")

// ErrRejected is matched by a [Client.Send] or [Client.Flush] error when the API refused
// some groups with a 4xx reply. They were written to the dead-letter file with the
// server's message and are not retried.
var ErrRejected = errors.New("atropos: groups rejected by the API")

// ErrAbandoned is matched, beside [ErrRejected], by a [Client.Send] or [Client.Flush]
// error when groups went to the dead-letter file instead of being posted again: the API
// may already hold [ClientConfig.MaxCopies] copies of them (see "How many copies" in the
// package doc). [Client.Abandoned] counts them.
var ErrAbandoned = fmt.Errorf("%w: not posted again, as the API may hold as many copies as allowed", ErrRejected)

const spoolExt = ".jsonl"

// Send delivers groups to the API: one group to /scored_data, several to
// /scored_data_list, each group stamped with this env's id. The groups are checked with
// [ScoredDataGroup.Validate] first (an invalid group fails the call before anything is
// written or sent), then written durably to the spool, then posted; "received" and
// "buffered" replies are success. The spool file stays until /status-env shows the
// groups served, so that a restart of the API, or of the API and this process together,
// loses none of them (see the package doc).
//
// Network errors and 5xx replies are retried with backoff until ctx ends or
// Retry.MaxAttempts is reached; then Send returns an error matching [ErrSpooled] and the
// groups stay in the spool. A 4xx reply is permanent: the groups go to the dead-letter
// file (for a list, each group is resent alone first so that only the bad ones are kept
// there) and Send returns an error matching [ErrRejected]. Send returns
// [ErrNotRegistered] before [Client.Register] succeeded: data posted before the trainer
// registered wedges the upstream server.
//
// Every attempt first checks the registration with one GET /status-env and, after a
// failed request, verifies it (see the package doc); when the API lost it, Send waits
// for the trainer, registers again and stamps the groups with the new env id. While the
// API has no trainer, Send waits until ctx ends (the error then matches both
// [ErrSpooled] and [ErrWaitingForTrainer]). 408 and 429 replies are retried, waiting at
// least their Retry-After.
func (c *Client) Send(ctx context.Context, groups ...*ScoredDataGroup) error {
	if len(groups) == 0 {
		return nil
	}
	reg := c.Registration()
	if reg == nil {
		return ErrNotRegistered
	}
	vopts := ValidateOptions{
		MaxTokenLen: reg.MaxTokenLen, GroupSize: c.cfg.GroupSize,
		AllowNonPowerOfTwo: c.cfg.AllowNonPowerOfTwo, RequireInferenceLogprobs: c.cfg.RequireInferenceLogprobs,
	}
	lines := make([][]byte, len(groups))
	// Nothing holds lines once Send returns (see api.do): their buffers serve the
	// next sends.
	defer func() {
		for _, b := range lines {
			c.lineBufs.put(b)
		}
	}()
	for i, g := range groups {
		if err := g.Validate(vopts); err != nil {
			return fmt.Errorf("atropos: Send: group %d: %w", i, err)
		}
		b, err := c.encodeTo(c.lineBufs.get(), g, reg.EnvID)
		if err != nil {
			return fmt.Errorf("atropos: Send: group %d: %w", i, err)
		}
		lines[i] = b
	}
	name, err := c.spoolWrite(lines)
	if err != nil {
		return err
	}
	defer c.release(name)
	return c.deliver(ctx, name, groups, &encoded{envID: reg.EnvID, lines: lines})
}

// encoded is groups as encoded with env_id envID: a post under a registration with
// that id sends them as they are instead of encoding them again (a group with teacher
// rows is tens of MB of JSON).
type encoded struct {
	envID int
	lines [][]byte
}

// encode returns the JSON of g with env_id set to envID; g is not modified.
func (c *Client) encode(g *ScoredDataGroup, envID int) ([]byte, error) {
	return c.encodeTo(nil, g, envID)
}

// encodeTo is encode writing over dst's bytes.
func (c *Client) encodeTo(dst []byte, g *ScoredDataGroup, envID int) ([]byte, error) {
	c.encodes.Add(1)
	cp := *g
	cp.EnvID = &envID
	return cp.AppendJSON(dst[:0], &c.cfg.Encode)
}

// lineBuffers keeps the encoding buffers of finished sends for the next ones, so that
// a send does not allocate, and the runtime zero, a buffer the size of its groups'
// JSON (tens of MB for a group with teacher rows) every time.
type lineBuffers struct {
	mu   sync.Mutex
	bufs [][]byte
}

const (
	keptLineBuffers   = 4        // at most this many are kept
	maxKeptLineBuffer = 64 << 20 // a larger buffer is left to the garbage collector
)

// get returns a kept buffer, or nil when none is.
func (l *lineBuffers) get() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.bufs)
	if n == 0 {
		return nil
	}
	b := l.bufs[n-1]
	l.bufs[n-1] = nil
	l.bufs = l.bufs[:n-1]
	return b
}

// put keeps b for a later get, unless enough are kept or b is too large.
func (l *lineBuffers) put(b []byte) {
	if cap(b) == 0 || cap(b) > maxKeptLineBuffer {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bufs) < keptLineBuffers {
		l.bufs = append(l.bufs, b[:0])
	}
}

// spoolWrite writes lines as one spool file durably and returns its base name, marked
// in flight: the file is written under a temporary name, fsynced, renamed, and the
// directory fsynced.
func (c *Client) spoolWrite(lines [][]byte) (string, error) {
	dir := c.cfg.SpoolDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("atropos: spool: %w", err)
	}
	c.mu.Lock()
	c.seq++
	base := fmt.Sprintf("%020d-%06d", time.Now().UnixNano(), c.seq%1e6)
	c.inflight[base] = true
	c.mu.Unlock()
	name := spoolEntry{base: base}.name()
	tmp := filepath.Join(dir, "."+name+".tmp")
	err := writeFileSync(tmp, lines)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		c.release(base)
		return "", fmt.Errorf("atropos: spool: %w", err)
	}
	c.nameMu.Lock()
	c.names[base] = spoolEntry{base: base}
	c.nameMu.Unlock()
	return base, nil
}

func writeFileSync(path string, lines [][]byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if _, err = f.Write(l); err == nil {
			_, err = f.Write([]byte{'\n'})
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (c *Client) release(name string) {
	c.mu.Lock()
	delete(c.inflight, name)
	c.mu.Unlock()
}

// deliver posts the groups of one spool file and settles the file: kept (held) until
// the API served them after success, removed after dead-lettering, kept otherwise.
func (c *Client) deliver(ctx context.Context, name string, groups []*ScoredDataGroup, pre *encoded) error {
	lines, err := c.post(ctx, name, groups, pre)
	var ae *APIError
	switch {
	case err == nil:
		return nil // the file is held until /status-env shows its groups served
	case errors.Is(err, errCopiesSpent):
		c.nameMu.Lock()
		e := c.entry(name)
		c.nameMu.Unlock()
		return c.abandon(name, e)
	case errors.As(err, &ae) && !ae.Temporary():
		err = c.reject(ctx, name, groups, lines, ae)
		if errors.Is(err, ErrSpooled) {
			return err
		}
	default:
		return fmt.Errorf("%w (%s): %w", ErrSpooled, name, err)
	}
	if rerr := os.Remove(c.path(name)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		c.api.logger.Warn("atropos: spool: removing a settled file", "file", name, "err", rerr)
	} else {
		c.forgetName(name)
	}
	return err
}

// reject handles a 4xx reply: a single group goes to the dead-letter file; a list is
// split and each group resent alone so that only the groups the API refuses are kept.
// A group of the list the API takes is first written to a spool file of its own, held
// until it is served. lines are the groups as last posted.
func (c *Client) reject(ctx context.Context, name string, groups []*ScoredDataGroup, lines [][]byte, ae *APIError) error {
	if len(groups) == 1 {
		if err := c.deadLetter(lines[0], ae); err != nil {
			return fmt.Errorf("%w: writing the dead letter: %w", ErrSpooled, err)
		}
		return fmt.Errorf("%w: %w", ErrRejected, ae)
	}
	var rejected []error
	for i, g := range groups {
		own, err := c.spoolWrite([][]byte{lines[i]})
		if err == nil {
			// Earlier posts of the list that the API may have taken count for each
			// of its groups.
			c.nameMu.Lock()
			listed := c.entry(name)
			c.nameMu.Unlock()
			err = c.setCopies(own, spoolEntry{copies: listed.copies, env: listed.env})
			if err != nil {
				c.release(own)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSpooled, err)
		}
		one, err := c.post(ctx, own, []*ScoredDataGroup{g}, nil)
		c.release(own)
		var ae1 *APIError
		switch {
		case err == nil:
		case errors.Is(err, errCopiesSpent):
			c.nameMu.Lock()
			e := c.entry(own)
			c.nameMu.Unlock()
			switch aerr := c.abandon(own, e); {
			case errors.Is(aerr, ErrRejected):
				rejected = append(rejected, fmt.Errorf("group %d: %w", i, aerr))
			case aerr != nil:
				return aerr
			}
		case errors.As(err, &ae1) && !ae1.Temporary():
			os.Remove(c.path(own)) // still in the list's file until the dead letter is written
			c.forgetName(own)
			if derr := c.deadLetter(one[0], ae1); derr != nil {
				return fmt.Errorf("%w: writing the dead letter: %w", ErrSpooled, derr)
			}
			rejected = append(rejected, fmt.Errorf("group %d: %w", i, ae1))
		default:
			// The earlier groups of the list may be sent again with the rest: at least once.
			return fmt.Errorf("%w: %w", ErrSpooled, err)
		}
	}
	if len(rejected) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrRejected, errors.Join(rejected...))
}

// post sends the groups of spool file name with retries and checks the reply. Every
// attempt takes a registration known to be current, makes a /status-env check younger
// than MaxCheckAge (see the package doc), and stamps the groups with its env id, so a
// group is never posted into an API that lost this env's or the trainer's registration
// as far as the API lets this env see, nor under an id that is not this env's. An
// attempt under pre's env id sends pre's lines; others encode the groups. It returns
// the groups as last encoded.
func (c *Client) post(ctx context.Context, name string, groups []*ScoredDataGroup, pre *encoded) ([][]byte, error) {
	path := "/scored_data"
	if len(groups) > 1 {
		path = "/scored_data_list"
	}
	odd := false
	for _, g := range groups {
		odd = odd || g.Len() != c.cfg.GroupSize
	}
	lines := make([][]byte, len(groups))
	err := c.retry(ctx, "POST "+path, true, func(ctx context.Context, reg Registration, epoch uint64) error {
		if pre != nil && pre.envID == reg.EnvID && len(pre.lines) == len(groups) {
			copy(lines, pre.lines)
		} else {
			for i, g := range groups {
				b, err := c.encode(g, reg.EnvID)
				if err != nil {
					return &APIError{Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: "encoding the group: " + err.Error()}
				}
				lines[i] = b
			}
		}
		body := lines[0]
		if len(lines) > 1 {
			body = append([]byte{'['}, bytes.Join(lines, []byte{','})...)
			body = append(body, ']')
		}
		// The registration was current at the last request; the API may have been
		// restarted or reset since without any request failing, or the process
		// stopped for a while. A recent /status-env shows most such resets, so that
		// the group neither wedges a fresh API nor lands under an id re-issued to
		// another env.
		if err := c.freshCheck(ctx, reg.EnvID, epoch); err != nil {
			return err
		}
		// Counted on disk before the post: a process that dies from here on leaves
		// in the file's name that the API may hold this copy. A file this process
		// posted MaxCopies times already (a retry after posts that may have been
		// taken) is posted no more.
		if c.copiesOf(name) >= c.cfg.MaxCopies {
			return errCopiesSpent
		}
		before, err := c.countPost(name, reg.EnvID)
		if err != nil {
			return err
		}
		sendTick := c.tick()
		c.beginPost(epoch, len(groups), odd)
		var reply struct {
			Status   string `json:"status"`
			Buffered int    `json:"buffered"`
		}
		if err := c.api.do(ctx, http.MethodPost, path, body, &reply); err != nil {
			// A post the API may have taken stays counted (the bound counts every copy
			// that can reach the trainer), unless a status poll shows it did not.
			taken := mayHaveTaken(err) && !c.notQueued(ctx, reg.EnvID, epoch, sendTick)
			c.endPost(epoch, len(groups), taken)
			if !taken {
				if uerr := c.setCopies(name, before); uerr != nil {
					c.api.logger.Warn("atropos: spool: undoing the count of a post", "err", uerr)
				}
			}
			return err
		}
		if reply.Status != "received" && reply.Status != "buffered" {
			c.endPost(epoch, len(groups), true)
			return &APIError{Method: http.MethodPost, Path: path, Status: http.StatusOK, Message: fmt.Sprintf("unexpected status %q", reply.Status)}
		}
		// Which groups of a list were buffered the reply does not say: none counts as
		// surely queued then.
		q := make([]bool, len(groups))
		for i := range q {
			q[i] = reply.Status == "received" && reply.Buffered == 0
		}
		err = c.accepted(epoch, sendTick, name, q)
		c.endPost(epoch, len(groups), false)
		return err
	})
	return lines, err
}

// mayHaveTaken reports whether a post that failed with err may still have been taken
// by the API: not when the connection was refused, nor after a 4xx or a 500 (upstream
// raises those before queueing), a 501 or a 503 (no server behind a proxy); yes after a
// dropped connection, a timeout, a garbled 200, or a proxy's 502 or 504.
func mayHaveTaken(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusOK || ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout
	}
	return true
}

// notQueued polls /status-env once after a post sent at sendTick failed in a way the
// API may have taken it, and reports whether the reply shows it did not: no batch
// formed since the post was sent, and the queue holds no more than the groups surely
// there before it.
func (c *Client) notQueued(ctx context.Context, envID int, epoch, sendTick uint64) bool {
	if ctx.Err() != nil {
		return false
	}
	var st EnvStatus
	tick := c.tick()
	if !c.tried(epoch, c.cfg.Now()) {
		return false
	}
	if err := c.once(ctx, func(ctx context.Context) error { return c.api.statusEnv(ctx, envID, &st) }); err != nil {
		return false
	}
	c.mu.Lock()
	stepSeen, stepTick, odd := c.lastStep, c.lastStepTick, c.oddSizes
	surely := 0
	for _, s := range c.retained {
		if !s.out && s.queued && s.sendTick > stepTick && s.replyTick < tick {
			surely++
		}
	}
	c.mu.Unlock()
	if !c.observe(epoch, st, tick) {
		return false
	}
	return !odd && st.CurrentStep == stepSeen && stepTick < sendTick && st.SelfQueueSize <= surely
}

// DeadLetter is one line of the dead-letter file: a group the API refused, with why.
type DeadLetter struct {
	// Time is when the API refused the group.
	Time time.Time `json:"time"`
	// Path is the endpoint that refused it ("/scored_data").
	Path string `json:"path"`
	// Status is the refusal's HTTP status code.
	Status int `json:"status"`
	// Error is the API's message.
	Error string `json:"error"`
	// Group is the refused group, as it was sent.
	Group *ScoredDataGroup `json:"group"`
}

// deadLetter appends a group (its encoded JSON) to the dead-letter file durably.
func (c *Client) deadLetter(group []byte, ae *APIError) error {
	head, err := json.Marshal(struct {
		Time   time.Time `json:"time"`
		Path   string    `json:"path"`
		Status int       `json:"status"`
		Error  string    `json:"error"`
	}{time.Now().UTC(), ae.Path, ae.Status, ae.Message})
	if err != nil {
		return err
	}
	line := make([]byte, 0, len(head)+len(group)+12)
	line = append(line, head[:len(head)-1]...)
	line = append(line, `,"group":`...)
	line = append(line, group...)
	line = append(line, "}\n"...)
	c.api.logger.Error("atropos: group rejected, kept in the dead-letter file", "file", c.cfg.DeadLetter, "status", ae.Status, "error", ae.Message)
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(c.cfg.DeadLetter), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(c.cfg.DeadLetter, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The file may have just been created: make its directory entry durable too, before
	// the caller removes the group's spool file.
	return syncDir(filepath.Dir(c.cfg.DeadLetter))
}

// ReadDeadLetters calls fn for each entry of a dead-letter file's contents, in order.
func ReadDeadLetters(r io.Reader, fn func(DeadLetter) error) error {
	dec := json.NewDecoder(r)
	for {
		var dl DeadLetter
		err := dec.Decode(&dl)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("atropos: dead letter: %w", err)
		}
		if err := fn(dl); err != nil {
			return err
		}
	}
}

// Spooled returns the number of spool files waiting to be sent (each holding the groups
// of one Send), including those being sent right now. The files of groups the API
// accepted under the current registration and was not yet seen to serve are not
// counted ([Client.Unserved] counts their groups), nor are those accepted under an
// earlier registration that wait until its queue shows they are no longer there (see
// the package doc); a new Client on the same directory counts both, and its Register
// sends them again when it may.
func (c *Client) Spooled() (int, error) {
	entries, err := c.spoolFiles()
	return len(entries), err
}

// spoolFiles lists the spool files neither held under the current registration nor
// waiting on an earlier one, oldest first.
func (c *Client) spoolFiles() ([]spoolEntry, error) {
	dirents, err := os.ReadDir(c.cfg.SpoolDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("atropos: spool: %w", err)
	}
	var out []spoolEntry
	c.nameMu.Lock()
	defer c.nameMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range dirents {
		n := d.Name()
		if !d.Type().IsRegular() || n == filepath.Base(c.cfg.DeadLetter) {
			continue
		}
		e, ok := parseSpoolName(n)
		if !ok {
			continue
		}
		if known, ok := c.names[e.base]; !ok || known != e {
			c.names[e.base] = e
		}
		if c.held[e.base] == nil && !c.waitingOnPred(e.base) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b spoolEntry) int { return strings.Compare(a.base, b.base) })
	return out, nil
}

// Flush sends every group waiting in the spool, oldest first, stamped with this env's
// current id; files another call is sending right now are skipped. [Client.Register]
// calls it, so groups spooled by an earlier process are sent before new ones. It stops at
// the first error that leaves groups in the spool ([ErrSpooled]); dead-lettered groups
// ([ErrRejected]) do not stop it and are reported at the end. Leftover temporary files of
// an interrupted spool write are removed: their Send never returned.
//
// A file whose groups the API accepted under an earlier registration (an earlier
// process's, or one this client retired) is sent again only once that registration's
// queue shows they can no longer be there, and a file the API accepted twice is never
// posted again but dead-lettered (see the package doc): Flush polls /status-env for
// those earlier env ids, and a later Flush sends what they released.
func (c *Client) Flush(ctx context.Context) error {
	reg := c.Registration()
	if reg == nil {
		return ErrNotRegistered
	}
	c.removeTemps()
	entries, err := c.spoolFiles()
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, e := range entries {
		if e.copies > 0 && !c.free[e.base] && !c.inflight[e.base] {
			// Taken by an API under a registration that is not this client's now: it
			// may still wait in that API's queue.
			c.await(e.env, e.base, -1)
		}
	}
	c.mu.Unlock()
	c.fillPredCounts()
	c.checkPreds(ctx)
	if entries, err = c.spoolFiles(); err != nil {
		return err
	}
	var rejected []error
	sent := 0
	for _, e := range entries {
		c.mu.Lock()
		busy := c.inflight[e.base] || c.held[e.base] != nil // a Send may have finished since the listing
		if !busy {
			c.inflight[e.base] = true
		}
		c.mu.Unlock()
		if busy {
			continue
		}
		if e.copies >= c.cfg.MaxCopies {
			err = c.abandon(e.base, e)
		} else {
			err = c.replay(ctx, e.base)
		}
		c.release(e.base)
		if errors.Is(err, ErrRejected) {
			rejected = append(rejected, err)
			continue
		}
		if err != nil {
			return err
		}
		sent++
	}
	if sent > 0 {
		c.api.logger.Info("atropos: spool: sent what the spool held", "files", sent, "rejected", len(rejected))
	}
	return errors.Join(rejected...)
}

// replay reads the groups of one spool file and delivers them, stamped with the env id
// current when they are posted. A file that cannot be read as groups is renamed with a
// ".corrupt" suffix and reported.
func (c *Client) replay(ctx context.Context, name string) error {
	path := c.path(name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // delivered meanwhile
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSpooled, err)
	}
	var groups []*ScoredDataGroup
	err = ReadJSONL(f, func(g *ScoredDataGroup) error {
		_, err := c.encode(g, 0) // a group that cannot be encoded cannot be sent either
		groups = append(groups, g)
		return err
	})
	f.Close()
	if err != nil || len(groups) == 0 {
		bad := path + ".corrupt"
		if rerr := os.Rename(path, bad); rerr != nil {
			return fmt.Errorf("%w: %s: %v (rename: %v)", ErrSpooled, name, err, rerr)
		}
		c.forgetName(name)
		c.api.logger.Error("atropos: spool: unreadable file set aside", "file", bad, "err", err)
		return fmt.Errorf("%w: spool file %s is unreadable (moved to %s): %v", ErrRejected, name, bad, err)
	}
	c.api.logger.Info("atropos: spool: replaying", "file", name, "groups", len(groups))
	return c.deliver(ctx, name, groups, nil)
}

func (c *Client) removeTemps() {
	entries, _ := os.ReadDir(c.cfg.SpoolDir)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp") {
			e, _ := parseSpoolName(strings.TrimSuffix(strings.TrimPrefix(n, "."), ".tmp"))
			c.mu.Lock()
			busy := c.inflight[e.base]
			c.mu.Unlock()
			if !busy {
				os.Remove(filepath.Join(c.cfg.SpoolDir, n))
			}
		}
	}
}
