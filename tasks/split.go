package tasks

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Split defaults, as in the original environment.
const (
	// DefaultEvalSize is the smallest number of tasks held out for evaluation.
	DefaultEvalSize = 10
	// DefaultEvalSplitRatio is the share of tasks held out for evaluation.
	DefaultEvalSplitRatio = 0.15
	// NoEval, as [SplitConfig.EvalSize], holds out no task: every task trains. (Zero
	// cannot say it: it means DefaultEvalSize.)
	NoEval = -1
)

// ErrDatasetTooSmall is wrapped by the error [Split] returns when the hold-out would
// leave no task for training.
var ErrDatasetTooSmall = errors.New("tasks: dataset too small for the train/eval split")

// SplitConfig configures [Split]. The zero value is the original environment's default
// with seed 0.
type SplitConfig struct {
	// Seed seeds the shuffle; the same seed and tasks give the same split.
	Seed uint64
	// EvalSize is the smallest number of eval tasks; 0 means DefaultEvalSize and
	// [NoEval] none at all (EvalSplitRatio is then not used). Other negative values
	// are an error.
	EvalSize int
	// EvalSplitRatio is the share of eval tasks, in [0, 1); 0 means
	// DefaultEvalSplitRatio.
	EvalSplitRatio float64
}

// Split shuffles a copy of ts with a generator seeded by cfg.Seed and holds out the
// first max(EvalSize, ⌊len(ts)·EvalSplitRatio⌋) tasks for evaluation (none with
// EvalSize [NoEval]); the rest are the train split. When no task would be left for
// training, the error wraps [ErrDatasetTooSmall] and says how many tasks are needed.
// ts is not modified.
func Split(ts []Task, cfg SplitConfig) (train, eval []Task, err error) {
	size, ratio := cfg.EvalSize, cfg.EvalSplitRatio
	if size == NoEval {
		if len(ts) == 0 {
			return nil, nil, fmt.Errorf("%w: no tasks to train on", ErrDatasetTooSmall)
		}
		return shuffle(ts, cfg.Seed), []Task{}, nil
	}
	switch {
	case size < 0:
		return nil, nil, fmt.Errorf("tasks: SplitConfig.EvalSize %d is negative", size)
	case size == 0:
		size = DefaultEvalSize
	}
	switch {
	case math.IsNaN(ratio) || ratio < 0 || ratio >= 1:
		return nil, nil, fmt.Errorf("tasks: SplitConfig.EvalSplitRatio %v is outside [0, 1)", ratio)
	case ratio == 0:
		ratio = DefaultEvalSplitRatio
	}
	n := len(ts)
	nEval := max(size, int(float64(n)*ratio))
	if nEval >= n {
		return nil, nil, fmt.Errorf("%w: %d tasks, %d held out for eval (eval size %d, ratio %v) leaves none to train on; use more than %d tasks or a smaller eval size (NoEval holds out none)",
			ErrDatasetTooSmall, n, nEval, size, ratio, nEval)
	}
	shuffled := shuffle(ts, cfg.Seed)
	return shuffled[nEval:], shuffled[:nEval:nEval], nil
}

// BuiltinSplit splits the built-in tasks as the original environment does: after a
// shuffle seeded by seed, max(1, ⌊8·85/100⌋) = 6 tasks train and 2 evaluate.
func BuiltinSplit(seed uint64) (train, eval []Task) {
	shuffled := shuffle(builtins, seed)
	nTrain := max(1, len(shuffled)*85/100)
	return shuffled[:nTrain:nTrain], shuffled[nTrain:]
}

// shuffle returns a shuffled copy of ts.
func shuffle(ts []Task, seed uint64) []Task {
	out := make([]Task, len(ts))
	copy(out, ts)
	newRand(seed).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// newRand returns the package's seeded generator. The second PCG word is a fixed
// constant so that seed 0 is as good as any other.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}
