package agenticopd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

// Serve is the online loop: it registers with the trajectory API, then keeps as many
// groups in flight as the API's back-pressure allows (and at most MaxGroups), sending
// every kept group through the client's spool. Groups a sink would drop (see
// [Group.Dropped]) are not sent. When the API says pause, Serve starts no new group;
// the groups in flight finish and are sent.
//
// Restarts of the API (or of the trainer, which restarts it, or a /reset_data) are
// survived: the client notices that the API lost its registration (see
// [atropos.Client.Send] for the rules), waits for the trainer, registers again and
// sends again both the spool and the groups the old API had accepted but not yet
// served (counted as env/groups_resent_on_reset; env/api_resets counts the resets).
// No group is posted before the trainer registered again, none under an env id that is
// not this env's, and pacing uses only figures of the env's current registration.
// While the API answers but waits for a trainer, Serve waits too, for as long as it
// takes.
//
// Serve returns nil when the API's stop rule holds (total steps reached), ctx.Err()
// itself when ctx ends (context.Canceled for a cancelled ctx, e.g. on SIGINT or SIGTERM
// through [os/signal.NotifyContext]: a clean shutdown, not a failure), and an error only
// for what cannot clear by waiting: the API unreachable (answering nothing, or every
// status poll failing with network errors or 5xx) for Config.StatusTimeout, before the
// first registration as after it (the error names the API's URL), a status poll
// refused with a 4xx, a group invalid for the API (it wraps
// [atropos.ErrInvalidGroup]; a group size that differs from the client's is the usual
// cause), or a teacher server that refused DistillTopK logprobs (it wraps
// [vllm.ErrMaxLogprobs]): every later group would fail the same way; or
// Config.MaxDroppedInARow groups dropped in a row (wrapping [ErrDroppedInARow]). In every case it
// waits for the groups in flight, then disconnects (only when the registration is known
// to be current: see [atropos.Client.Disconnect]); when it gives up it first cancels
// them.
//
// A group whose collection or Send was cut short by ctx is counted as
// env/cancelled_groups, not as a failure; a group handed to the client is on disk in the
// spool, and stays there until the API is seen to serve it (so that a crash of this
// process and the API together loses none): when a Send gives up (the client's retry budget ran out), Serve flushes the
// spool again once the API answers a status poll, and a group still spooled when Serve
// ends is sent by the next Register. A group that fails to collect is logged and
// counted (env/failed_groups), and Serve goes on with the next task.
func (e *Env) Serve(ctx context.Context, client *atropos.Client) error {
	if client == nil {
		return errors.New("agenticopd: serve: nil *atropos.Client")
	}
	replayLeft, err := e.register(ctx, client)
	if err != nil {
		return err
	}
	l := &serveLoop{e: e, client: client, fatal: make(chan struct{}), opts: collectOptions{keepEqual: e.cfg.KeepEqualScores, maxTokenLen: e.cfg.MaxTokenLen}}
	if l.opts.maxTokenLen == 0 {
		if reg := client.Registration(); reg != nil && reg.MaxTokenLen > 0 {
			l.opts.maxTokenLen = reg.MaxTokenLen
		}
	}
	// Groups run on work: a Serve that gives up on the API cancels them (a group whose
	// Send began is already in the spool), one that ends normally lets them finish.
	work, cancelWork := context.WithCancel(ctx)
	var gaveUp bool
	defer func() {
		if gaveUp {
			cancelWork()
		}
		l.waitPolling(context.WithoutCancel(ctx))
		cancelWork()
		l.syncResets()
		// The disconnect is preceded by a status check: on a slow API it takes a few
		// of the round trips the client has learned.
		budget := max(min(10*time.Second, e.cfg.StatusTimeout), 4*client.StatusCheckLimit())
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		switch err := client.Disconnect(dctx); {
		case errors.Is(err, atropos.ErrRegistrationLost):
			e.cfg.Logger.Info("not disconnecting: the trajectory API lost this env's registration", "err", err)
		case err != nil:
			e.cfg.Logger.Warn("disconnect from the trajectory API failed", "err", err)
		}
	}()

	l.spooled.Store(replayLeft)

	ticker := time.NewTicker(e.cfg.PollInterval)
	defer ticker.Stop()
	var failingSince time.Time // start of the current run of failed status polls
	for {
		pollStart := time.Now()
		pctx, cancel := context.WithTimeout(ctx, e.cfg.StatusTimeout)
		dec, _, err := client.Pace(pctx, l.inFlight())
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case l.fatalErr() != nil:
			gaveUp = true
			return l.fatalErr()
		case errors.Is(err, atropos.ErrWaitingForTrainer):
			// The API answers; it lost the trainer and waits for it to register again.
			failingSince = time.Time{}
			e.cfg.Logger.Info("waiting for the trainer to register with the trajectory API again")
		case permanent(err):
			gaveUp = true
			return fmt.Errorf("agenticopd: serve: status poll: %w", err)
		case err != nil:
			if failingSince.IsZero() {
				// The run of failures began when this poll began: a poll that hangs
				// until its StatusTimeout deadline is a whole StatusTimeout of failure.
				failingSince = pollStart
			}
			if time.Since(failingSince) >= e.cfg.StatusTimeout {
				gaveUp = true
				return fmt.Errorf("agenticopd: serve: the trajectory API at %s has failed every status poll for %v (is it running? raise Config.StatusTimeout to wait longer): %w", client.URL(), e.cfg.StatusTimeout, err)
			}
			e.cfg.Logger.Warn("status poll failed", "err", err)
		case dec.Stop:
			// The groups in flight finish and are sent; then whatever the spool still
			// holds (groups sent again after a reset, Sends that gave up) is sent too.
			l.waitPolling(ctx)
			l.syncResets()
			if err := client.Flush(ctx); err != nil {
				e.cfg.Logger.Warn("spool flush at the end failed; the next Register sends what is left", "err", err)
			}
			l.syncResets()
			return nil
		default:
			failingSince = time.Time{}
			l.syncResets()
			l.maybeFlush(work)
			if !dec.Pause {
				for range max(min(dec.Start, e.cfg.MaxGroups-l.inFlight()), 0) {
					task, err := e.train.Next(ctx)
					if err != nil {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						return fmt.Errorf("agenticopd: serve: next task: %w", err)
					}
					l.start(work, task)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.fatal:
			gaveUp = true
			return l.fatalErr()
		case <-ticker.C:
		}
	}
}

// register registers client with the trajectory API. It waits for a trainer for as
// long as it takes (the API answers, with no trainer), but gives up when the API
// answered nothing (network errors, 5xx) for StatusTimeout, with an error that names
// its URL. replayLeft is set when the registration stands but the replay of the spool
// did not finish: Serve's loop sends the rest.
func (e *Env) register(ctx context.Context, client *atropos.Client) (replayLeft bool, _ error) {
	start := time.Now()
	for {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.StatusTimeout)
		err := client.Register(rctx)
		cancel()
		switch {
		case err == nil:
			return false, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case client.Registration() != nil:
			e.cfg.Logger.Warn("sending the spool at registration did not finish; serving goes on and sends the rest", "err", err)
			return true, nil
		case errors.Is(err, atropos.ErrWaitingForTrainer):
			// The API answers: no trainer yet, or not started (no /batch yet).
			e.cfg.Logger.Info("waiting for a trainer to register with the trajectory API", "url", client.URL(),
				"waited", time.Since(start).Round(time.Second))
		case errors.Is(err, context.DeadlineExceeded):
			return false, fmt.Errorf("agenticopd: serve: the trajectory API at %s answered nothing for %v "+
				"(is it running? raise Config.StatusTimeout to wait longer): %w", client.URL(), e.cfg.StatusTimeout, err)
		default:
			return false, fmt.Errorf("agenticopd: serve: registering with the trajectory API at %s: %w", client.URL(), err)
		}
	}
}

// serveLoop is the state of one Serve call: the groups in flight and the spool.
type serveLoop struct {
	e      *Env
	client *atropos.Client
	opts   collectOptions
	wg     sync.WaitGroup

	mu       sync.Mutex
	running  int
	flushing bool
	report   sync.Mutex // serialises OnGroup
	// spooled is set when a Send gave up with groups left in the spool.
	spooled atomic.Bool

	// resets, resent and abandoned are the client's counts already added to the
	// metrics.
	resets, resent, abandoned int

	// fatal is closed, once, when a group turned out invalid for the API: every
	// later group would be too (the groups come from one configuration), so Serve
	// stops instead of collecting groups it cannot send.
	fatal     chan struct{}
	fatalOnce sync.Once
	fatalE    error
}

// syncResets adds the client's new resets to the metrics; after a reset the spool holds
// the groups to send again, so it is flushed.
func (l *serveLoop) syncResets() {
	r, n, a := l.client.Resets(), l.client.Resent(), l.client.Abandoned()
	if a != l.abandoned {
		l.e.metrics.count("env/groups_abandoned", float64(a-l.abandoned))
		l.abandoned = a
	}
	if r == l.resets && n == l.resent {
		return
	}
	l.e.metrics.count("env/api_resets", float64(r-l.resets))
	l.e.metrics.count("env/groups_resent_on_reset", float64(n-l.resent))
	l.resets, l.resent = r, n
	l.spooled.Store(true)
}

// permanent reports whether a status poll error cannot clear by waiting: a 4xx reply
// other than 408 and 429 (e.g. a proxy that strips the GET body), or a client that is
// not registered.
func permanent(err error) bool {
	var ae *atropos.APIError
	return errors.As(err, &ae) && !ae.Temporary() || errors.Is(err, atropos.ErrNotRegistered)
}

func (l *serveLoop) fail(err error) {
	l.fatalOnce.Do(func() {
		l.mu.Lock()
		l.fatalE = err
		l.mu.Unlock()
		close(l.fatal)
	})
}

func (l *serveLoop) fatalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalE
}

func (l *serveLoop) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// start collects one group for task and sends it, in its own goroutine.
func (l *serveLoop) start(ctx context.Context, task tasks.Task) {
	e := l.e
	l.mu.Lock()
	l.running++
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() { l.mu.Lock(); l.running--; l.mu.Unlock() }()
		g, err := e.collect(ctx, task, l.opts)
		if err != nil && ctx.Err() != nil {
			e.metrics.count("env/cancelled_groups", 1)
			return
		}
		if err != nil {
			e.cfg.Logger.Warn("group failed", "task", task.ID, "err", err)
			if errors.Is(err, vllm.ErrMaxLogprobs) {
				l.fail(fmt.Errorf("agenticopd: serve: the teacher server does not allow DistillTopK logprobs, "+
					"so every group with a hint would fail: %w", err))
			}
			return
		}
		if g.Dropped == "" {
			switch err := l.client.Send(ctx, g.Data); {
			case err != nil && ctx.Err() != nil:
				// Cut short at shutdown: the group is in the spool for the next Register.
				e.metrics.count("env/cancelled_groups", 1)
			case errors.Is(err, atropos.ErrAbandoned):
				// Posted as often as the client allows, and kept in the dead-letter
				// file: counted as env/groups_abandoned.
				e.cfg.Logger.Warn("group kept in the dead-letter file, not posted again", "task", task.ID, "err", err)
			case err != nil:
				e.cfg.Logger.Warn("send failed", "task", task.ID, "err", err)
				e.metrics.count("env/send_failures", 1)
				if errors.Is(err, atropos.ErrSpooled) {
					l.spooled.Store(true)
				}
				if errors.Is(err, atropos.ErrInvalidGroup) {
					l.fail(fmt.Errorf("agenticopd: serve: a group for task %s is invalid for the trajectory API "+
						"(do Config.GroupSize and the client's GroupSize agree?): %w", task.ID, err))
				}
			default:
				e.metrics.count("env/groups_sent", 1)
			}
		}
		if e.cfg.OnGroup != nil {
			l.report.Lock()
			e.cfg.OnGroup(g)
			l.report.Unlock()
		}
		if err := e.metrics.dropped.observe(g, e.cfg); err != nil {
			l.fail(err)
		}
	}()
}

// waitPolling waits for the groups in flight, polling the API's status meanwhile as
// the loop does, so that the client does not take itself for paused (see
// [atropos.ClientConfig.PauseLimit]) and can disconnect at the end.
func (l *serveLoop) waitPolling(ctx context.Context) {
	done := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { l.wg.Wait(); close(done); stop() }()
	t := time.NewTicker(l.e.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if pctx.Err() == nil {
				sctx, cancel := context.WithTimeout(pctx, l.e.cfg.StatusTimeout)
				_, _ = l.client.Status(sctx)
				cancel()
			}
		}
	}
}

// maybeFlush sends the spool again, in the background, when a Send left groups there
// and no flush is running. It is called after a status poll succeeded, so the API is
// answering.
func (l *serveLoop) maybeFlush(ctx context.Context) {
	if !l.spooled.Load() {
		return
	}
	l.mu.Lock()
	if l.flushing {
		l.mu.Unlock()
		return
	}
	l.flushing = true
	l.mu.Unlock()
	// Cleared before the flush starts: a Send that fails meanwhile sets it again.
	l.spooled.Store(false)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.client.Flush(ctx); err != nil {
			l.e.cfg.Logger.Warn("spool flush failed", "err", err)
			if errors.Is(err, atropos.ErrSpooled) {
				l.spooled.Store(true)
			}
		}
		l.mu.Lock()
		l.flushing = false
		l.mu.Unlock()
	}()
}

// Process collects n groups and writes them to w as JSON Lines, one group per line,
// the format of Atropos's process mode. As that mode does, it keeps groups whose
// scores are all equal and applies no length limit. A group that fails is logged and
// replaced by one for the next task, and so is a group whose prompt does not fit the
// policy's context ([DropPromptTooLong]: never written); after more than n of these
// together Process gives up with an error that wraps the last failure. A teacher server that refuses DistillTopK
// logprobs ([vllm.ErrMaxLogprobs]) stops Process at once: every group with a hint
// would fail. At most MaxGroups groups are collected at once. n == 0 writes nothing; a
// negative n or a nil w is an error.
//
// Lines are written in the order the groups' tasks were drawn, whatever order the
// groups finish in (a group that finished waits for the earlier ones; at most
// 2·MaxGroups groups are drawn ahead of the oldest one not written), and each group's
// sequences in the order of its rollouts. So with a Source whose order is fixed by
// Config.Seed (the built-in tasks, a dataset's cycle) and Config.SeedSampling on a
// server that honours seeds (the simulator, vLLM as far as its batching allows), the
// same Seed gives the same lines.
//
// With Config.ReportPath set, Process also writes an HTML page of the groups it wrote
// there (package report), in the same order, token text from the policy's
// detokenizer. A failure of the page (the file, a detokenize request) does not stop
// the groups: Process writes them all, then returns an error that says so. Whatever
// ends Process, the page is closed: when Process fails (its error, ctx's end, a
// failure of the page), the page says at its top that the run failed, and why; the
// page of a process killed before it could close it says that it is incomplete.
func (e *Env) Process(ctx context.Context, n int, w io.Writer) error {
	switch {
	case n < 0:
		return fmt.Errorf("agenticopd: process: %d groups asked for", n)
	case w == nil:
		return errors.New("agenticopd: process: nil writer")
	case n == 0:
		return nil
	}
	rep, err := e.openReport(e.cfg.ReportPath)
	if err != nil {
		return err
	}
	enc := atropos.NewEncoder(w)
	workers := min(e.cfg.MaxGroups, n)
	window := semaphore.NewWeighted(int64(2 * workers)) // groups drawn and not yet retired in order
	var (
		mu                                 sync.Mutex
		written, inFlight, waiting, failed int
		lastErr                            error

		done = map[int64]*Group{} // finished groups by number, waiting for the earlier ones; nil: failed
		next = int64(1)           // the number of the next group to retire

		drawMu sync.Mutex // pairs a draw with its number
		drawn  int64      // the number of the last group drawn
	)
	// claim reserves the next group to collect, or reports that none is needed.
	claim := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if written+waiting+inFlight >= n || failed > n {
			return false
		}
		inFlight++
		return true
	}
	// retire writes the finished groups that are next in draw order, under mu.
	retire := func(gctx context.Context) error {
		for {
			g, ok := done[next]
			if !ok {
				return nil
			}
			delete(done, next)
			next++
			window.Release(1)
			if g == nil {
				continue
			}
			waiting--
			if err := enc.Encode(g.Data); err != nil {
				return fmt.Errorf("agenticopd: process: write: %w", err)
			}
			written++
			rep.add(gctx, g, e.cfg.Logger)
			if e.cfg.OnGroup != nil {
				e.cfg.OnGroup(g)
			}
		}
	}
	eg, gctx := errgroup.WithContext(ctx)
	for range workers {
		eg.Go(func() error {
			for {
				if err := window.Acquire(gctx, 1); err != nil {
					return err
				}
				if !claim() {
					window.Release(1)
					return nil
				}
				drawMu.Lock()
				task, err := e.train.Next(gctx)
				if err == nil {
					drawn++
				}
				num := drawn
				drawMu.Unlock()
				if err != nil {
					return err
				}
				opts := collectOptions{keepEqual: true, drawn: num}
				g, err := e.collect(gctx, task, opts)
				mu.Lock()
				inFlight--
				switch {
				case err != nil && gctx.Err() != nil:
					mu.Unlock()
					return gctx.Err()
				case errors.Is(err, vllm.ErrMaxLogprobs):
					mu.Unlock()
					return fmt.Errorf("agenticopd: process: the teacher server does not allow DistillTopK logprobs: %w", err)
				case err != nil:
					failed++
					lastErr = err
					done[num] = nil
				case g.Dropped == DropPromptTooLong:
					failed++
					lastErr = fmt.Errorf("agenticopd: task %s: %s", task.ID, firstStopDetail(g.Rollouts))
					done[num] = nil
				default:
					waiting++
					done[num] = g
				}
				groupErr := err
				err = retire(gctx)
				mu.Unlock()
				if groupErr != nil {
					e.cfg.Logger.Warn("group failed", "task", task.ID, "err", groupErr)
				}
				if err != nil {
					return err
				}
			}
		})
	}
	err = eg.Wait()
	if err == nil && written < n {
		err = fmt.Errorf("agenticopd: process: %d of %d groups written; last failure: %w", written, n, lastErr)
	}
	repErr := rep.close(ctx, err)
	switch {
	case err != nil:
		return err
	case repErr != nil:
		return fmt.Errorf("%w (all %d groups were written to w)", repErr, n)
	}
	return nil
}

// EvalSample is one line of samples.jsonl written by Evaluate.
type EvalSample struct {
	TaskID      string         `json:"task_id"`            // the task
	Prompt      string         `json:"prompt"`             // the task statement shown
	Response    string         `json:"response"`           // the last assistant message
	Correctness float64        `json:"correctness"`        // C of the verification
	Reward      float64        `json:"reward"`             // the reward
	Turns       int            `json:"turns"`              // policy calls used
	Stop        string         `json:"stop,omitempty"`     // why the agent loop ended
	Error       string         `json:"error,omitempty"`    // a failed rollout's error (then correctness 0)
	Messages    []chat.Message `json:"messages,omitempty"` // the conversation
}

// Evaluate runs one greedy rollout (temperature 0) of each of the first EvalSize (10)
// eval tasks, as the reference does, without OPD, and returns eval/mean_correctness,
// eval/mean_reward, eval/pass_rate and eval/n_items.
// When dir is not "", it writes dir/metrics.json and dir/samples.jsonl in the layout of
// Atropos's evaluate mode. A rollout that fails is a sample with the error and
// correctness 0, as in the reference.
func (e *Env) Evaluate(ctx context.Context, dir string) (map[string]float64, error) {
	start := time.Now()
	size := e.cfg.EvalSize
	if size <= 0 {
		size = tasks.DefaultEvalSize
	}
	eval := e.eval[:min(size, len(e.eval))]
	samples := make([]EvalSample, len(eval))
	rollouts := make([]Rollout, len(eval))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(e.cfg.MaxRollouts)
	for i, task := range eval {
		eg.Go(func() error {
			s := EvalSample{TaskID: task.ID, Prompt: firstRunes(task.Statement, 200)}
			r, err := e.runRollout(gctx, e.evalAgent, task)
			switch {
			case err != nil && gctx.Err() != nil:
				return gctx.Err()
			case err != nil:
				s.Response = "ERROR: " + err.Error()
				s.Error = err.Error()
			default:
				rollouts[i] = r
				s.Response = firstRunes(lastAssistant(r.Trajectory.Messages), 500)
				s.Correctness = r.Reward.Correctness
				s.Reward = r.Reward.Reward
				s.Turns = r.Trajectory.TurnsUsed
				s.Stop = string(r.Trajectory.Stop)
				s.Messages = r.Trajectory.Messages
			}
			samples[i] = s
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	var sums rewardSums
	sums.add(rollouts) // a failed rollout is a zero Rollout: it counts with zero scores
	m := map[string]float64{"eval/n_items": float64(len(samples))}
	sums.put(m, "eval")
	if dir == "" {
		return m, nil
	}
	model := ""
	if p, ok := e.cfg.Policy.(interface {
		Model(context.Context) (string, error)
	}); ok {
		model, _ = p.Model(ctx) // known after the rollouts; "" when the server did not say
	}
	if err := writeEval(dir, m, samples, time.Since(start), model, e.cfg); err != nil {
		return m, err
	}
	return m, nil
}

func writeEval(dir string, m map[string]float64, samples []EvalSample, took time.Duration, model string, cfg Config) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agenticopd: evaluate: %w", err)
	}
	doc := map[string]any{
		"config_general": map[string]any{
			"model_name":                    model,
			"total_evaluation_time_seconds": took.Seconds(),
			"generation_parameters":         map[string]any{"temperature": 0.0, "max_tokens": cfg.MaxTokens, "max_turns": cfg.MaxTurns},
		},
		"results": map[string]any{"atropos|agentic_opd|0": m, "all": m},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("agenticopd: evaluate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metrics.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("agenticopd: evaluate: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "samples.jsonl"))
	if err != nil {
		return fmt.Errorf("agenticopd: evaluate: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, s := range samples {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return fmt.Errorf("agenticopd: evaluate: %w", err)
		}
	}
	return errors.Join(f.Sync(), f.Close())
}

func lastAssistant(msgs []chat.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chat.RoleAssistant && msgs[i].Content != "" {
			return msgs[i].Content
		}
	}
	return ""
}

func firstRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
