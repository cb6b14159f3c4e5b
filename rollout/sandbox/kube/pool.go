package kube

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/agentic-opd/agenticopd/rollout"
)

// pool holds prestarted pods by pool key (image, workspace, network), each taken at
// most once. A pod is in the pool from its create on (it may still be starting).
type pool struct {
	mu    sync.Mutex
	idle  map[string][]string // key -> pod names, oldest first
	count int                 // pods in idle, plus creates under way
}

func newPool() *pool { return &pool{idle: map[string][]string{}} }

// reserve claims room for up to n pods under max; it returns how many it claimed.
func (p *pool) reserve(n, max int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n = min(n, max-p.count)
	if n <= 0 {
		return 0
	}
	p.count += n
	return n
}

// add puts a created pod in the pool (its room was reserved).
func (p *pool) add(key, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle[key] = append(p.idle[key], name)
}

// release gives back the room of a reservation that made no pod.
func (p *pool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count--
}

// take removes and returns the oldest pod of key, if any.
func (p *pool) take(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := p.idle[key]
	if len(names) == 0 {
		return "", false
	}
	name := names[0]
	if len(names) == 1 {
		delete(p.idle, key)
	} else {
		p.idle[key] = names[1:]
	}
	p.count--
	return name, true
}

// prune removes the pods for which gone says true, and returns them.
func (p *pool) prune(gone func(name string) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key, names := range p.idle {
		kept := names[:0]
		for _, n := range names {
			if gone(n) {
				out = append(out, n)
				p.count--
				continue
			}
			kept = append(kept, n)
		}
		if len(kept) == 0 {
			delete(p.idle, key)
		} else {
			p.idle[key] = kept
		}
	}
	return out
}

// size is the number of pods in the pool and being created for it.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Prestart implements [rollout.Prestarter]: it creates up to n pods for spec in the
// background (rate-limited, at most Config.MaxIdle waiting, all specs together) for
// NewSandboxFor to take. A spec the factory would refuse is ignored; a pod that
// fails to start is found when it is taken, and that NewSandboxFor then reports
// the error (a fault of the image, a pull) or starts a pod of its own. Pods not
// taken end after Config.IdleExit like any pod without exec, and at Close.
func (f *Factory) Prestart(_ context.Context, spec rollout.SandboxSpec, n int) {
	if n <= 0 || f.cfg.MaxIdle < 0 {
		return
	}
	p, err := f.resolve(spec)
	if err != nil {
		f.cfg.Logger.LogAttrs(f.ctx, slog.LevelDebug, "kube: prestart refused", slog.String("error", err.Error()))
		return
	}
	key := poolKey(p.Image, p.WorkDir, p.Network)
	// Pods that ended while they waited (their idle exit) give their room back.
	for _, name := range f.pool.prune(f.podEnded) {
		f.deletePod(name)
	}
	n = f.pool.reserve(n, f.cfg.MaxIdle)
	for range n {
		ok := f.goBackground(func() {
			name, err := f.createPod(f.ctx, p)
			if err != nil {
				f.pool.release()
				if f.ctx.Err() == nil {
					f.cfg.Logger.LogAttrs(f.ctx, slog.LevelWarn, "kube: prestart", slog.String("error", err.Error()))
				}
				return
			}
			f.pool.add(key, name)
		})
		if !ok {
			f.pool.release()
		}
	}
}

// podEnded reports whether the watch saw pod name end or go.
func (f *Factory) podEnded(name string) bool {
	p, deleted, _ := f.watch.get(name)
	if deleted {
		return true
	}
	if p == nil {
		return false
	}
	ph := classify(p).phase
	return ph != phasePending && ph != phaseReady
}

// goBackground runs fn in a goroutine the factory waits for at Close; false when the
// factory is closed.
func (f *Factory) goBackground(fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Go(fn)
	return true
}

// takeOrStart returns a running pod for p: a prestarted one when one is there and
// runs, else a new one.
func (f *Factory) takeOrStart(ctx context.Context, p podParams) (string, error) {
	key := poolKey(p.Image, p.WorkDir, p.Network)
	for {
		name, ok := f.pool.take(key)
		if !ok {
			break
		}
		err := f.waitReady(ctx, name)
		if err == nil {
			return name, nil
		}
		f.deletePod(name)
		if ctx.Err() != nil {
			return "", err
		}
		// An image that does not pull or start fails a new pod the same way.
		if errors.Is(err, ErrPodStart) && f.watchStartFailed(err) {
			return "", err
		}
	}
	return f.startPod(ctx, p)
}

// watchStartFailed reports whether err came from a pod that cannot start (not from
// one that ended, idle, while it waited in the pool).
func (f *Factory) watchStartFailed(err error) bool {
	var se *startError
	return errors.As(err, &se) && se.phase == phaseStartFail
}

// startError is the detail of an ErrPodStart.
type startError struct {
	phase  phase
	reason string
}

func (e *startError) Error() string { return e.reason }
