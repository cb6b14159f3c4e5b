package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeOfflineFeedsTheTrainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-steps", "2", "-group-size", "2", "-batch-size", "4", "-spool", t.TempDir()}, &out), out.String())
	text := out.String()
	first, _, _ := strings.Cut(text, "\n")
	assert.Contains(t, first, "SIMULATOR")
	assert.Contains(t, text, "trainer: step 1:")
	assert.Contains(t, text, "trainer: step 2:")
	assert.Contains(t, text, "env: the trainer has every step it asked for")
}

func TestServeRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), []string{"-batch-size", "1", "-group-size", "4"}, &out))
}

// cancelOnGroup is run's stdout: it cancels run's ctx at the env's first group, and
// fails the test if anything writes after run returned.
type cancelOnGroup struct {
	t      *testing.T
	cancel context.CancelFunc
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (w *cancelOnGroup) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.t.Errorf("write after run returned: %q", p)
	}
	if bytes.HasPrefix(p, []byte("env: group")) {
		w.cancel()
	}
	return w.buf.Write(p)
}

func TestServeStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sig, stop := context.WithCancel(ctx)
	w := &cancelOnGroup{t: t, cancel: stop}
	err := run(sig, []string{"-steps", "1000", "-group-size", "2", "-batch-size", "4", "-spool", t.TempDir()}, w)
	w.mu.Lock()
	w.closed = true
	out := w.buf.String()
	w.mu.Unlock()
	require.ErrorIs(t, err, context.Canceled, out)
	require.NoError(t, ctx.Err(), "stopped by the cancel, not the test's deadline")
	assert.Contains(t, out, "env: group")
}
