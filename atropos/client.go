package atropos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrTotalStepsReached is returned by [Client.Ready] and [Client.WaitReady] once the stop
// rule holds: the trainer step plus the batches already queued exceed the total steps.
var ErrTotalStepsReached = errors.New("atropos: total steps reached")

// DefaultMaxCheckAge is the default of [ClientConfig.MaxCheckAge]: far shorter than an
// API process takes to start again, far longer than a status round trip.
const DefaultMaxCheckAge = 500 * time.Millisecond

// DefaultPauseLimit is the default of [ClientConfig.PauseLimit]: thirty of Serve's
// status polls, far shorter than an API restart with a trainer and another env
// registering again.
const DefaultPauseLimit = 3 * time.Second

// DefaultMaxCopies is the default of [ClientConfig.MaxCopies].
const DefaultMaxCopies = 2

// ClientConfig configures an env-side [Client]. The zero value of each field, except
// EnvName, GroupSize and SpoolDir, is a documented default.
type ClientConfig struct {
	// EnvName is sent as desired_name at registration (required).
	EnvName string
	// GroupSize is the number of sequences per group (required).
	GroupSize int
	// MaxTokenLength is sent as max_token_length at registration; it weighs this env
	// in /status-env's env_weight. Default 2048.
	MaxTokenLength int
	// Weight is sent as weight at registration: this env's share of inference capacity
	// in /status-env's env_weight. Default 1.0; a negative weight counts as 0 there.
	Weight float64
	// MinBatchAllocation, when not nil, is the fraction of every batch reserved for this
	// env (0 to 1).
	MinBatchAllocation *float64
	// MaxBatchesOffPolicy is how many batches' worth of data may sit in the queue before
	// the env pauses. Default 3; negative never pauses for queue size.
	MaxBatchesOffPolicy int
	// TotalSteps is the stop rule's limit. Zero takes num_steps from the registration
	// reply; negative never stops.
	TotalSteps int
	// MaxWorkers caps the work [Client.Pace] lets run at once; zero means no cap beyond
	// the back-pressure formula.
	MaxWorkers int
	// AllowNonPowerOfTwo accepts group sizes that are not powers of two (see
	// [ValidateOptions]).
	AllowNonPowerOfTwo bool
	// RequireInferenceLogprobs refuses groups without inference_logprobs, which the
	// reference trainer needs.
	RequireInferenceLogprobs bool
	// Encode sets how groups are encoded, e.g. the dense zero-padded distill layout.
	Encode EncodeOptions

	// SpoolDir holds groups until the API accepted them (required). It is created when
	// first needed. Only one Client may use a spool directory at a time.
	SpoolDir string
	// DeadLetter is the JSON Lines file where groups the API rejected (4xx) are kept with
	// the server's message. Default SpoolDir/dead-letter.jsonl.
	DeadLetter string
	// MaxCopies is how many posts of a group the API may have taken (a post answered
	// "received", or one that failed in a way that does not rule out that the API took
	// it) before the group is no longer posted and goes to the dead-letter file instead
	// (see "How many copies" in the package doc). Default 2: a group reaches the trainer
	// at most twice. 1 makes delivery at most once; a higher bound dead-letters fewer
	// groups on a faulty network at the price of more copies.
	MaxCopies int

	// HTTPClient sends the requests. Default http.DefaultClient. Give it no overall
	// Timeout shorter than a large group's upload; use Retry.AttemptTimeout instead.
	HTTPClient *http.Client
	// Logger receives retry, dead-letter and replay messages. Default: none.
	Logger *slog.Logger
	// Retry sets the retry policy for network errors and 5xx replies.
	Retry RetryConfig
	// PollInterval is the wait between polls of /info and /register-env during
	// [Client.Register]. Default 1s.
	PollInterval time.Duration
	// StatusInterval is the wait between /status-env polls in [Client.WaitReady].
	// Default 100ms, as BaseEnv.
	StatusInterval time.Duration
	// MaxCheckAge bounds the age of the /status-env check that guards every post and
	// disconnect, from the moment the check was sent to the moment the post goes out,
	// on the monotonic clock. A check older than this (a slow answer, a process that
	// was stopped in between) is made again before the post. Default 500ms. When the
	// round trips themselves take longer, the limit doubles after every three checks
	// in a row that came back too old (up to 64 × MaxCheckAge), with a warning, so that
	// posts go on; on such a link, raise it.
	MaxCheckAge time.Duration
	// PauseLimit is how long the process may stand still (stopped, swapped out, the
	// machine suspended; a wall clock that moved more than a second apart from the
	// monotonic one counts too), as a heartbeat timer sees it, or an idle client go
	// without a request, before the client takes itself for paused: its id may have
	// been re-issued to another env by an API restart it never saw, so before its next
	// post it registers again, and it sends no disconnect under the old id. A slow API
	// reply is not a pause. Default 3s, and never below four times the current status
	// check limit (see MaxCheckAge). [Client.WaitReady] and [Client.Status] polls keep
	// the registration fresh; a caller that posts rarely should poll in between.
	PauseLimit time.Duration
	// Now reads the clock that ages the checks. Default [time.Now], whose monotonic
	// reading is what counts; tests give a clock they move by hand.
	Now func() time.Time
}

// RetryConfig is the retry policy for network errors and 5xx replies: exponential
// backoff with full jitter. The caller's context bounds all attempts.
type RetryConfig struct {
	// MaxAttempts is the number of attempts per request; zero retries until the context
	// ends.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between attempts. Defaults 500ms (or
	// MaxBackoff, when that is set and smaller) and 10s (or MinBackoff, when larger).
	MinBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt; zero means only the context bounds it.
	AttemptTimeout time.Duration
}

// Registration is what the API told the env at registration.
type Registration struct {
	// EnvID is the id the API gave this env; every group it posts carries it.
	EnvID int
	// WandbName is the env's unique name in the API (its desired name with a suffix).
	WandbName string
	// CheckpointDir is the trainer's checkpoint directory, as the API reports it.
	CheckpointDir string
	// StartingStep is the API's step when the env registered.
	StartingStep int
	// CheckpointInterval is the trainer's number of steps between checkpoints.
	CheckpointInterval int
	// NumSteps is the number of steps the trainer runs.
	NumSteps int
	// BatchSize and MaxTokenLen come from /info.
	BatchSize, MaxTokenLen int
}

// Client is the env side of the trajectory API: registration, back-pressure, and sending
// scored groups through a durable spool. It is safe for concurrent use; it starts no
// goroutines. It keeps the buffers that [Client.Send] encoded groups into (at most 4,
// of at most 64 MiB each) for the next sends, so that sending a steady stream of groups
// does not allocate a buffer the size of each group's JSON; they go with the Client.
//
// Delivery is at least once: a group handed to [Client.Send] is written to the spool
// and fsynced before any request, and removed only once /status-env shows that the API
// served it (or after a successful [Client.Disconnect]). If the process dies in between,
// with the API or not, the group is sent again by the next [Client.Flush] (which
// [Client.Register] runs), so the API may see it twice, never zero times.
type Client struct {
	api *api
	cfg ClientConfig

	mu       sync.Mutex
	reg      *Registration
	state    regState // what is known of reg
	epoch    uint64   // counts registrations; a post or poll made under another epoch is stale
	lastStep int      // the highest current_step seen under reg
	// lastStepTick is the clock when lastStep was seen.
	lastStepTick uint64
	resets       int
	resent       int
	waiting      bool                 // registering, and the API answers: it waits for a trainer
	clock        uint64               // event clock ordering posts and polls
	retained     []*sent              // groups accepted under reg, kept until known to be served
	held         map[string]*heldFile // their spool files, by name
	inflight     map[string]bool      // spool files being sent
	lastObserve  uint64               // the clock when the last /status-env reply was taken
	posting      int                  // groups in posts under reg with no reply yet
	uncertain    int                  // groups in failed posts under reg the API may have taken
	oddSizes     bool                 // a group not of GroupSize was posted under reg
	seq          uint64
	dlMu         sync.Mutex // serialises appends to the dead-letter file

	nameMu sync.Mutex            // serialises renames of spool files
	names  map[string]spoolEntry // spool files by base name, as last named on disk

	free      map[string]bool // spool files accepted before that may be sent again
	preds     map[int]*pred   // earlier registrations by env id, with the files waiting on them
	abandoned int             // groups dead-lettered instead of a third post
	encodes   atomic.Int64    // groups encoded for the spool or a post
	lineBufs  lineBuffers     // Send's encoding buffers, kept for the next sends
	retired   int             // registrations given up after a pause
	retiring  bool            // the registration was retired, not lost

	lastTry time.Time // when the last request under the registration began

	// The heartbeat that tells a paused process from a slow API (see [Client.tried]).
	beatTimer   *time.Timer
	beating     bool      // the timer is armed
	lastTryReal time.Time // lastTry on the real clock
	lastBeat    time.Time // when it last ran, on the real clock
	pauseWhy    string    // a pause a beat saw, for the next request to act on

	predPoll   time.Time // the last round of polls for earlier registrations
	checkLevel int       // doublings of MaxCheckAge the status checks have needed lately
	tooOld     int       // checks in a row older than their limit at this level

	// recovering is held (a buffered channel, so that waiting honours ctx) by the one
	// goroutine verifying or renewing the registration.
	recovering chan struct{}
}

// NewClient returns a client for the trajectory API at baseURL (e.g.
// "http://localhost:8000"). It does no I/O.
func NewClient(baseURL string, cfg ClientConfig) (*Client, error) {
	if cfg.EnvName == "" {
		return nil, errors.New("atropos: ClientConfig.EnvName is required")
	}
	if cfg.GroupSize < 1 {
		return nil, fmt.Errorf("atropos: ClientConfig.GroupSize %d: want at least 1", cfg.GroupSize)
	}
	if !cfg.AllowNonPowerOfTwo && cfg.GroupSize&(cfg.GroupSize-1) != 0 {
		return nil, fmt.Errorf("atropos: ClientConfig.GroupSize %d is not a power of two; set AllowNonPowerOfTwo to use it", cfg.GroupSize)
	}
	if cfg.SpoolDir == "" {
		return nil, errors.New("atropos: ClientConfig.SpoolDir is required: groups are kept there until the API accepts them")
	}
	if m := cfg.MinBatchAllocation; m != nil && !(*m >= 0 && *m <= 1) {
		return nil, fmt.Errorf("atropos: ClientConfig.MinBatchAllocation %v: want 0 to 1", *m)
	}
	if math.IsNaN(cfg.Weight) || math.IsInf(cfg.Weight, 0) {
		return nil, fmt.Errorf("atropos: ClientConfig.Weight %v: want a finite number", cfg.Weight)
	}
	if cfg.MaxTokenLength < 0 {
		return nil, fmt.Errorf("atropos: ClientConfig.MaxTokenLength %d: want a positive length (0 for the default)", cfg.MaxTokenLength)
	}
	if cfg.MaxTokenLength == 0 {
		cfg.MaxTokenLength = 2048
	}
	if cfg.Weight == 0 {
		cfg.Weight = 1
	}
	if cfg.MaxBatchesOffPolicy == 0 {
		cfg.MaxBatchesOffPolicy = 3
	}
	if cfg.DeadLetter == "" {
		cfg.DeadLetter = filepath.Join(cfg.SpoolDir, "dead-letter.jsonl")
	}
	if cfg.MaxCopies < 0 {
		return nil, fmt.Errorf("atropos: ClientConfig.MaxCopies %d: want at least 1 (0 for the default, %d)", cfg.MaxCopies, DefaultMaxCopies)
	}
	if cfg.MaxCopies == 0 {
		cfg.MaxCopies = DefaultMaxCopies
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 100 * time.Millisecond
	}
	if cfg.MaxCheckAge < 0 {
		return nil, fmt.Errorf("atropos: ClientConfig.MaxCheckAge %v: want a positive age (0 for the default)", cfg.MaxCheckAge)
	}
	if cfg.MaxCheckAge == 0 {
		cfg.MaxCheckAge = DefaultMaxCheckAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &cfg.Retry
	if r.MinBackoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.MinBackoff {
		return nil, fmt.Errorf("atropos: RetryConfig.MaxBackoff %v is below MinBackoff %v", r.MaxBackoff, r.MinBackoff)
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 500 * time.Millisecond
		if r.MaxBackoff > 0 {
			r.MinBackoff = min(r.MinBackoff, r.MaxBackoff)
		}
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = max(10*time.Second, r.MinBackoff)
	}
	a, err := newAPI(baseURL, cfg.HTTPClient, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.PauseLimit < 0 {
		return nil, fmt.Errorf("atropos: ClientConfig.PauseLimit %v: want a positive duration (0 for the default)", cfg.PauseLimit)
	}
	if cfg.PauseLimit == 0 {
		cfg.PauseLimit = DefaultPauseLimit
	}
	return &Client{
		api: a, cfg: cfg, inflight: map[string]bool{}, held: map[string]*heldFile{},
		names: map[string]spoolEntry{}, free: map[string]bool{}, preds: map[int]*pred{},
		recovering: make(chan struct{}, 1),
	}, nil
}

// URL returns the trajectory API's base URL, as the client uses it.
func (c *Client) URL() string { return c.api.base.String() }

// Registration returns the registration, or nil before [Client.Register] succeeded.
func (c *Client) Registration() *Registration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg == nil {
		return nil
	}
	r := *c.reg
	return &r
}

// Info is the reply of GET /info: -1 for both before a trainer registered.
type Info struct {
	// BatchSize is the trainer's batch size in sequences.
	BatchSize int `json:"batch_size"`
	// MaxTokenLen is the trainer's longest sequence in tokens.
	MaxTokenLen int `json:"max_token_len"`
}

// Register performs the start-up the API needs, in order: it polls GET /info until a
// trainer has registered (batch_size != -1), then POST /register-env until the reply is
// "success" (the API answers "wait for trainer to start" until the trainer's first
// /batch), then sends the groups left in the spool by an earlier run ([Client.Flush]).
// Nothing is posted before the trainer registered: data that arrives earlier wedges the
// upstream server. Register blocks until this is done or ctx ends. When only the replay
// fails, Register returns the replay's error but the registration stands
// ([Client.Registration] is set) and [Client.Flush] can be called again.
func (c *Client) Register(ctx context.Context) error {
	reg, err := c.registerEnv(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.adopt(reg)
	c.retained, c.held = nil, map[string]*heldFile{}
	c.mu.Unlock()
	c.api.logger.Info("atropos: registered", "env_id", reg.EnvID, "wandb_name", reg.WandbName, "batch_size", reg.BatchSize)
	return c.Flush(ctx)
}

type registerEnvRequest struct {
	MaxTokenLength     int      `json:"max_token_length"`
	DesiredName        string   `json:"desired_name"`
	Weight             float64  `json:"weight"`
	GroupSize          int      `json:"group_size"`
	MinBatchAllocation *float64 `json:"min_batch_allocation"`
}

type registerEnvReply struct {
	Status             string `json:"status"`
	EnvID              *int   `json:"env_id"`
	WandbName          string `json:"wandb_name"`
	CheckpointDir      string `json:"checkpoint_dir"`
	StartingStep       int    `json:"starting_step"`
	CheckpointInterval int    `json:"checkpoint_interval"`
	NumSteps           int    `json:"num_steps"`
}

// Disconnect tells the API this env is gone (POST /disconnect-env). Its queued data stays
// and is still batched. Call it on clean shutdown, after the last Send.
//
// Disconnect sends the env id only while the registration is known to be current: after
// a failed request it first verifies the registration as [Client.Send] does, and when
// the API lost it (the id may be another env's now) it sends nothing and returns
// [ErrRegistrationLost]. Like a post, it is preceded by a /status-env check younger
// than MaxCheckAge that shows the id is still this env's (see the package doc). It
// never registers again.
//
// After a successful Disconnect, the spool files of groups the API accepted but was
// not yet seen to serve are removed: the API that just answered for this env's
// registration holds them, and a later process would only send them twice. When
// Disconnect fails or is never called (the process dies), they stay, and the next
// Register sends them again.
func (c *Client) Disconnect(ctx context.Context) error {
	reg, epoch, st, ok := c.current()
	if !ok {
		return ErrNotRegistered
	}
	if st == regSuspect {
		select {
		case c.recovering <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := c.verify(ctx)
		<-c.recovering
		if err != nil {
			return err
		}
		reg, epoch, st, ok = c.current()
		if !ok {
			return ErrNotRegistered
		}
	}
	if st != regCurrent {
		c.mu.Lock()
		c.forget()
		c.mu.Unlock()
		return ErrRegistrationLost
	}
	// Not after a pause: a restart this env did not see may have given the id to
	// another env, and a fresh check cannot always tell (see the package doc).
	if !c.tried(epoch, c.cfg.Now()) {
		c.mu.Lock()
		c.forget()
		c.mu.Unlock()
		return fmt.Errorf("%w: not disconnecting under env id %d: the process was paused, and the id may be another env's now", ErrRegistrationLost, reg.EnvID)
	}
	// As before a post: a check younger than MaxCheckAge that shows the id is still this
	// env's, so that a restart this env did not see does not disconnect another env.
	switch err := c.freshCheck(ctx, reg.EnvID, epoch); {
	case errors.Is(err, errStaleRegistration):
		c.mu.Lock()
		c.forget()
		c.mu.Unlock()
		return ErrRegistrationLost
	case err != nil:
		c.noteFailure(epoch, err)
		return fmt.Errorf("atropos: POST /disconnect-env: checking the registration first: %w", err)
	}
	var reply struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := c.api.postJSON(ctx, "/disconnect-env", map[string]int{"env_id": reg.EnvID}, &reply); err != nil {
		c.noteFailure(epoch, err)
		return err
	}
	if reply.Status != "success" {
		return &APIError{Method: http.MethodPost, Path: "/disconnect-env", Status: http.StatusOK, Message: reply.Error}
	}
	// The API holds this env's registration, so it holds the groups it accepted and
	// did not serve yet too: sending them again later would only duplicate them.
	c.mu.Lock()
	var taken []string
	for name := range c.held {
		taken = append(taken, name)
	}
	c.forget()
	c.mu.Unlock()
	c.removeServed(taken)
	return nil
}

// forget drops the registration and what was accepted under it; the spool files of
// groups not known to be served stay on disk, and the next Register sends them again.
// Called with c.mu held.
func (c *Client) forget() {
	c.reg, c.retained, c.held = nil, nil, map[string]*heldFile{}
}

// retry runs op until it succeeds, fails permanently, or the attempts or ctx run out.
// When needReg is set, each attempt first takes a registration known to be current
// ([Client.ensure]) and gives it to op; a failed attempt makes the registration suspect.
// A 408 or 429 reply waits at least its Retry-After.
func (c *Client) retry(ctx context.Context, what string, needReg bool, op func(ctx context.Context, reg Registration, epoch uint64) error) error {
	r := c.cfg.Retry
	for attempt := 1; ; attempt++ {
		var reg Registration
		var epoch uint64
		if needReg {
			var err error
			if reg, epoch, err = c.ensure(ctx); err != nil {
				return fmt.Errorf("atropos: %s: %w", what, err)
			}
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, r.AttemptTimeout)
		}
		err := op(actx, reg, epoch)
		cancel()
		if err == nil {
			return nil
		}
		if needReg && ctx.Err() == nil {
			c.noteFailure(epoch, err)
		}
		if !retryable(ctx, err) {
			return err
		}
		if r.MaxAttempts > 0 && attempt >= r.MaxAttempts {
			return fmt.Errorf("atropos: %s: giving up after %d attempts: %w", what, attempt, err)
		}
		wait := backoff(r, attempt)
		var ae *APIError
		if errors.As(err, &ae) && ae.RetryAfter > wait {
			wait = ae.RetryAfter
		}
		c.api.logger.Warn("atropos: retrying", "op", what, "attempt", attempt, "wait", wait, "err", err)
		if serr := c.pause(ctx, wait, needReg, epoch); serr != nil {
			return fmt.Errorf("atropos: %s: %w (last error: %v)", what, serr, err)
		}
	}
}

// pause waits d before a retry. While the registration of epoch is suspect (probe),
// it looks at the API's /info every StatusInterval meanwhile: a refused connection
// shows the API process was down, which the next attempt's verification cannot see
// once the API is back, possibly with this env's id given to another env. Once the
// registration is lost, the wait ends: the next attempt registers again, at the pace
// of Register.
func (c *Client) pause(ctx context.Context, d time.Duration, probe bool, epoch uint64) error {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		if probe {
			switch c.stateOf(epoch) {
			case regLost:
				return nil
			case regSuspect:
				if err := sleep(ctx, min(left, c.cfg.StatusInterval)); err != nil {
					return err
				}
				pctx, cancel := context.WithDeadline(ctx, end)
				err := c.api.do(pctx, http.MethodGet, "/info", nil, nil)
				cancel()
				if err != nil && ctx.Err() == nil && errors.Is(err, syscall.ECONNREFUSED) {
					c.noteFailure(epoch, err)
				}
				continue
			}
		}
		return sleep(ctx, left)
	}
}

// stateOf is what is known of the registration of epoch: lost as well when another
// registration replaced it.
func (c *Client) stateOf(epoch uint64) regState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reg == nil || c.epoch != epoch {
		return regLost
	}
	return c.state
}

// backoff returns the wait after the given attempt: full jitter over an exponentially
// growing cap.
func backoff(r RetryConfig, attempt int) time.Duration {
	ceil := r.MinBackoff
	for i := 1; i < attempt && ceil < r.MaxBackoff; i++ {
		ceil *= 2 // ceil < MaxBackoff here, so this cannot wrap for any sane MaxBackoff
	}
	ceil = min(ceil, r.MaxBackoff)
	return r.MinBackoff/2 + rand.N(ceil-r.MinBackoff/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
