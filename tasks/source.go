package tasks

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
)

// ErrNoTasks is returned by [NewCycle] for an empty task list.
var ErrNoTasks = errors.New("tasks: no tasks")

// Source hands out tasks, one per call. Implementations must be safe for concurrent
// use. Next returns ctx.Err() once ctx has ended; a Source that runs out returns an
// error (a cycling Source never does).
type Source interface {
	// Next returns the next task.
	Next(ctx context.Context) (Task, error)
}

// SourceFunc adapts a function to a [Source].
type SourceFunc func(ctx context.Context) (Task, error)

// Next calls f(ctx).
func (f SourceFunc) Next(ctx context.Context) (Task, error) { return f(ctx) }

// Cycle is a [Source] that goes through its tasks forever, in an order reshuffled at the
// start of every pass by a generator seeded at construction: the same seed gives the
// same sequence. Within a pass every task comes exactly once. It is safe for concurrent
// use.
type Cycle struct {
	mu    sync.Mutex
	tasks []Task
	order []int
	pos   int
	rng   *rand.Rand
}

// NewCycle returns a Cycle over a copy of ts, shuffled by seed. It returns [ErrNoTasks]
// when ts is empty.
func NewCycle(ts []Task, seed uint64) (*Cycle, error) {
	if len(ts) == 0 {
		return nil, ErrNoTasks
	}
	c := &Cycle{
		tasks: append([]Task(nil), ts...),
		order: make([]int, len(ts)),
		rng:   newRand(seed),
	}
	for i := range c.order {
		c.order[i] = i
	}
	c.pos = len(c.order) // the first Next shuffles
	return c, nil
}

// Next returns the next task, or ctx.Err() when ctx has ended.
func (c *Cycle) Next(ctx context.Context) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pos == len(c.order) {
		c.rng.Shuffle(len(c.order), func(i, j int) { c.order[i], c.order[j] = c.order[j], c.order[i] })
		c.pos = 0
	}
	t := c.tasks[c.order[c.pos]]
	c.pos++
	return t, nil
}

// Len returns the number of tasks in one pass.
func (c *Cycle) Len() int { return len(c.tasks) }
