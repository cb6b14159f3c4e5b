package atropos_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

var trainerReg = atropos.TrainerRegistration{
	WandbGroup: "g", WandbProject: "p", BatchSize: 8, MaxTokenLen: 64,
	CheckpointDir: "/ckpt", SaveCheckpointInterval: 10, NumSteps: 50,
}

// httpClient returns a client with its own transport, closed when the test ends.
func httpClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func newEnv(t testing.TB, srv *atropostest.Server, dir string, mod ...func(*atropos.ClientConfig)) *atropos.Client {
	t.Helper()
	cfg := atropos.ClientConfig{
		EnvName: "env", GroupSize: 2, SpoolDir: dir, HTTPClient: httpClient(t),
		PollInterval: 2 * time.Millisecond, StatusInterval: 2 * time.Millisecond,
		Retry: atropos.RetryConfig{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := atropos.NewClient(srv.URL(), cfg)
	require.NoError(t, err)
	return c
}

func registered(t testing.TB, srv *atropostest.Server, dir string, mod ...func(*atropos.ClientConfig)) *atropos.Client {
	t.Helper()
	c := newEnv(t, srv, dir, mod...)
	require.NoError(t, c.Register(context.Background()))
	return c
}

// group returns a valid group of n sequences whose scores identify it: id, id+0.25...
func group(id float64, n int) *atropos.ScoredDataGroup {
	var g atropos.ScoredDataGroup
	for i := range n {
		d := atropos.NewDistillRows(4)
		_ = d.SetRow(2, []int32{11, 5}, []float32{-0.2, -1.8})
		_ = g.Add(atropos.Sequence{
			Tokens: []int{1, 2, 11, 12}, Masks: []int{-100, -100, 11, 12}, Score: id + float64(i)/4,
			InferenceLogprobs: []float64{1, 1, -0.3, -0.9}, Distill: d,
		})
	}
	return &g
}

// answered counts the requests to path that got a 200 reply.
func answered(srv *atropostest.Server, path string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Path == path && r.Status == http.StatusOK {
			n++
		}
	}
	return n
}

func scoresOf(groups []*atropos.ScoredDataGroup) []float64 {
	var out []float64
	for _, g := range groups {
		out = append(out, g.Scores[0])
	}
	slices.Sort(out)
	return out
}

func TestNewClientConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  atropos.ClientConfig
		url  string
		want string
	}{
		{"no name", atropos.ClientConfig{GroupSize: 2, SpoolDir: "x"}, "http://h", "EnvName is required"},
		{"no group size", atropos.ClientConfig{EnvName: "e", SpoolDir: "x"}, "http://h", "GroupSize 0"},
		{"not a power of two", atropos.ClientConfig{EnvName: "e", GroupSize: 3, SpoolDir: "x"}, "http://h", "not a power of two"},
		{"no spool", atropos.ClientConfig{EnvName: "e", GroupSize: 2}, "http://h", "SpoolDir is required"},
		{"bad allocation", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", MinBatchAllocation: ptr(1.5)}, "http://h", "MinBatchAllocation 1.5"},
		{"bad url", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x"}, "localhost:8000", "want http(s)://host"},
		// Non-finite numbers cannot be sent: Register would retry its marshal error forever.
		{"NaN allocation", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", MinBatchAllocation: ptr(math.NaN())}, "http://h", "MinBatchAllocation NaN"},
		{"NaN weight", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", Weight: math.NaN()}, "http://h", "Weight NaN"},
		{"Inf weight", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", Weight: math.Inf(1)}, "http://h", "Weight +Inf"},
		{"negative max token length", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", MaxTokenLength: -1}, "http://h", "MaxTokenLength -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := atropos.NewClient(tc.url, tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRegisterWaitsForTrainer(t *testing.T) {
	srv := atropostest.NewServer(t)
	c := newEnv(t, srv, t.TempDir())

	require.ErrorIs(t, c.Send(context.Background(), group(1, 2)), atropos.ErrNotRegistered)
	_, err := c.Ready(context.Background())
	require.ErrorIs(t, err, atropos.ErrNotRegistered)

	done := make(chan error, 1)
	go func() { done <- c.Register(context.Background()) }()

	// Until a trainer registers, only /info is polled.
	require.Eventually(t, func() bool { return srv.RequestCount("/info") >= 3 }, 5*time.Second, time.Millisecond)
	require.Zero(t, srv.RequestCount("/register-env"))

	// Registered but not started: register-env answers "wait for trainer to start".
	srv.RegisterTrainer(trainerReg)
	require.Eventually(t, func() bool { return srv.RequestCount("/register-env") >= 3 }, 5*time.Second, time.Millisecond)
	require.Empty(t, srv.Envs())
	require.Nil(t, c.Registration())

	// The trainer's first /batch opens registration.
	tr, err := atropos.NewTrainer(srv.URL(), atropos.WithHTTPClient(httpClient(t)))
	require.NoError(t, err)
	b, err := tr.Batch(context.Background())
	require.NoError(t, err)
	require.Nil(t, b)
	require.NoError(t, <-done)

	reg := c.Registration()
	require.Equal(t, &atropos.Registration{EnvID: 0, WandbName: "env_0", CheckpointDir: "/ckpt",
		CheckpointInterval: 10, NumSteps: 50, BatchSize: 8, MaxTokenLen: 64}, reg)
	require.Zero(t, srv.RequestCount("/scored_data"), "nothing posted during start-up")

	require.NoError(t, c.Send(context.Background(), group(1, 2)))
	require.Len(t, srv.Received(), 1)
	require.Equal(t, 0, *srv.Received()[0].EnvID)

	// A second env of the same name gets the next wandb name.
	c2 := registered(t, srv, t.TempDir())
	require.Equal(t, "env_1", c2.Registration().WandbName)
}

func TestRegisterRefusesGroupLargerThanBatch(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := newEnv(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.GroupSize = 16 })
	require.ErrorContains(t, c.Register(context.Background()), "group size 16 is larger than the trainer's batch size 8")
}

func TestRegisterEndsWithContext(t *testing.T) {
	srv := atropostest.NewServer(t)
	c := newEnv(t, srv, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Register(ctx), context.DeadlineExceeded)
	require.Nil(t, c.Registration())
}

func TestBackPressure(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	// Batch 8, group 2, one batch off-policy: pause once 4 groups are queued.
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.MaxBatchesOffPolicy = 1; c.TotalSteps = -1 })
	ctx := context.Background()

	for i := range 4 {
		ok, err := c.Ready(ctx)
		require.NoError(t, err)
		require.True(t, ok, "before group %d", i)
		require.NoError(t, c.Send(ctx, group(float64(i), 2)))
	}
	ok, err := c.Ready(ctx)
	require.NoError(t, err)
	require.False(t, ok, "4 groups of 2 fill one batch of 8")
	d, st, err := c.Pace(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, atropos.EnvStatus{QueueSize: 4, UnallocatedFraction: 1, SelfQueueSize: 4, MaxGroupSize: 2, EnvWeight: 1}, st)
	require.True(t, d.Pause)

	// WaitReady blocks until the trainer takes the batch.
	done := make(chan error, 1)
	go func() { done <- c.WaitReady(ctx) }()
	require.Eventually(t, func() bool { return srv.RequestCount("/status-env") >= 8 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("WaitReady returned %v while paused", err)
	default:
	}
	tr, err := atropos.NewTrainer(srv.URL(), atropos.WithHTTPClient(httpClient(t)))
	require.NoError(t, err)
	batch, err := tr.Batch(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, atropos.Sequences(batch...))
	require.NoError(t, <-done)
	ok, err = c.Ready(ctx)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestStopRule(t *testing.T) {
	reg := trainerReg
	reg.NumSteps = 1
	srv := atropostest.NewServer(t, atropostest.WithTrainer(reg))
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.MaxBatchesOffPolicy = 10 })
	ctx := context.Background()
	for i := range 4 {
		require.NoError(t, c.Send(ctx, group(float64(i), 2)))
	}
	ok, err := c.Ready(ctx) // step 0 + 4×2/8 = 1, not above 1
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, c.Send(ctx, group(9, 2)))
	for range 3 {
		require.NoError(t, c.Send(ctx, group(9, 2)))
	}
	_, err = c.Ready(ctx) // 0 + 8×2/8 = 2 > 1
	require.ErrorIs(t, err, atropos.ErrTotalStepsReached)
	require.ErrorIs(t, c.WaitReady(ctx), atropos.ErrTotalStepsReached)
}

func TestSendBuffered(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	c := registered(t, srv, dir)
	ctx := context.Background()
	small := func(id float64) *atropos.ScoredDataGroup {
		g := group(id, 1)
		g.GroupOverrides = map[string]any{"group_size": 1}
		return g
	}
	require.NoError(t, c.Send(ctx, small(1)))
	require.Equal(t, 1, srv.Buffered(0))
	require.Empty(t, srv.Queue())
	require.NoError(t, c.Send(ctx, small(2)))
	require.Equal(t, 0, srv.Buffered(0))
	require.Len(t, srv.Queue(), 2, "two groups of 1 sum to the env's group size")
	n, err := c.Spooled()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSendListAndGzip(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	ctx := context.Background()
	tiny := &atropos.ScoredDataGroup{Tokens: [][]int{{1}, {2}}, Masks: [][]int{{1}, {2}}, Scores: []float64{0, 1}}
	require.NoError(t, c.Send(ctx, tiny))
	require.NoError(t, c.Send(ctx, group(1, 2), group(2, 2), group(3, 2)))
	var posts []atropostest.Request
	for _, r := range srv.Requests() {
		if r.Method == "POST" && (r.Path == "/scored_data" || r.Path == "/scored_data_list") {
			posts = append(posts, r)
		}
	}
	require.Len(t, posts, 2)
	require.Equal(t, "/scored_data", posts[0].Path)
	require.False(t, posts[0].Gzip, "%d bytes is under 1 KiB", len(posts[0].Body))
	require.Equal(t, "/scored_data_list", posts[1].Path)
	require.True(t, posts[1].Gzip, "%d bytes is over 1 KiB", len(posts[1].Body))
	require.GreaterOrEqual(t, len(posts[1].Body), atropos.GzipMinBytes)
	require.Equal(t, []float64{0, 1, 2, 3}, scoresOf(srv.Received()))
}

// TestSendEncodesEachGroupOnce: the JSON written to the spool is the body posted
// under the same registration; Send does not encode a group a second time.
func TestSendEncodesEachGroupOnce(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	ctx := context.Background()
	require.NoError(t, c.Send(ctx, group(1, 2)))
	require.NoError(t, c.Send(ctx, group(2, 2), group(3, 2), group(4, 2)))
	require.Equal(t, int64(4), c.Encodes())
	got := srv.Received()
	require.Len(t, got, 4)
	for _, g := range got {
		require.NotNil(t, g.EnvID)
		require.Equal(t, c.Registration().EnvID, *g.EnvID)
	}
	require.Equal(t, []float64{1, 2, 3, 4}, scoresOf(got))
}

// TestSendReusesItsBuffers: a send encodes into the buffers of the sends before it,
// and each post still carries its own groups, a small uncompressed one included.
func TestSendReusesItsBuffers(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	ctx := context.Background()
	require.Empty(t, c.LineBuffers())
	require.NoError(t, c.Send(ctx, group(1, 2)))
	first := c.LineBuffers()
	require.Len(t, first, 1, "the buffer of the send is kept")
	require.NoError(t, c.Send(ctx, group(2, 2)))
	require.Equal(t, first, c.LineBuffers(), "the second send wrote into the first one's buffer")
	require.NoError(t, c.Send(ctx, group(3, 2), group(4, 2), group(5, 2), group(6, 2), group(7, 2)))
	require.Len(t, c.LineBuffers(), 4, "at most 4 are kept")
	require.Contains(t, c.LineBuffers(), first[0])
	tiny := &atropos.ScoredDataGroup{Tokens: [][]int{{1}, {2}}, Masks: [][]int{{1}, {2}}, Scores: []float64{8, 9}}
	require.NoError(t, c.Send(ctx, tiny))
	require.NoError(t, c.Send(ctx, group(10, 2)))
	require.Equal(t, []float64{1, 2, 3, 4, 5, 6, 7, 8, 10}, scoresOf(srv.Received()))
	var posts []atropostest.Request
	for _, r := range srv.Requests() {
		if r.Method == "POST" && (r.Path == "/scored_data" || r.Path == "/scored_data_list") {
			posts = append(posts, r)
		}
	}
	require.Len(t, posts, 5)
	require.False(t, posts[3].Gzip)
	want := *tiny
	envID := c.Registration().EnvID
	want.EnvID = &envID
	b, err := want.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(b), string(posts[3].Body), "the uncompressed body is the tiny group's alone")
}

func TestSendRejectsInvalidGroupBeforeSpooling(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	tests := []struct {
		name string
		g    *atropos.ScoredDataGroup
		want string
	}{
		{"wrong size", group(1, 4), "4 sequences, the group size is 2"},
		{"too long", &atropos.ScoredDataGroup{Tokens: [][]int{make([]int, 64), make([]int, 3)}, Masks: [][]int{make([]int, 64), make([]int, 3)},
			Scores: []float64{0, 1}, InferenceLogprobs: [][]float64{make([]float64, 64), make([]float64, 3)}}, "max_token_len is 64"},
		{"no inference logprobs", &atropos.ScoredDataGroup{Tokens: [][]int{{1}, {2}}, Masks: [][]int{{1}, {2}}, Scores: []float64{0, 1}}, "inference_logprobs: missing"},
	}
	c := registered(t, srv, dir, func(c *atropos.ClientConfig) { c.RequireInferenceLogprobs = true })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Send(context.Background(), group(5, 2), tc.g)
			require.ErrorIs(t, err, atropos.ErrInvalidGroup)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "group 1")
		})
	}
	require.Empty(t, srv.Received())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func readDeadLetters(t *testing.T, path string) []atropos.DeadLetter {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []atropos.DeadLetter
	require.NoError(t, atropos.ReadDeadLetters(f, func(d atropos.DeadLetter) error { out = append(out, d); return nil }))
	return out
}

func TestSend4xxGoesToDeadLetter(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	c := registered(t, srv, dir)
	srv.SetError("/scored_data", 422, `{"detail":[{"type":"value_error","loc":["body","tokens"],"msg":"bad tokens"}]}`)

	err := c.Send(context.Background(), group(7, 2))
	require.ErrorIs(t, err, atropos.ErrRejected)
	var ae *atropos.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 422, ae.Status)
	require.Equal(t, 1, srv.RequestCount("/scored_data"), "4xx is not retried")

	dls := readDeadLetters(t, filepath.Join(dir, "dead-letter.jsonl"))
	require.Len(t, dls, 1)
	require.Equal(t, 422, dls[0].Status)
	require.Equal(t, "/scored_data", dls[0].Path)
	require.Equal(t, "bad tokens (at [body tokens])", dls[0].Error)
	require.Equal(t, []float64{7, 7.25}, dls[0].Group.Scores)
	n, err := c.Spooled()
	require.NoError(t, err)
	require.Zero(t, n, "a dead-lettered group leaves the spool")
}

func TestSendList4xxIsolatesBadGroups(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	dl := filepath.Join(t.TempDir(), "dl", "rejected.jsonl")
	c := registered(t, srv, dir, func(c *atropos.ClientConfig) { c.DeadLetter = dl })
	srv.SetError("/scored_data_list", 400, "bad list")
	srv.FailNext("/scored_data", 1, 400, "") // the first group alone is refused too

	err := c.Send(context.Background(), group(1, 2), group(2, 2), group(3, 2))
	require.ErrorIs(t, err, atropos.ErrRejected)
	require.ErrorContains(t, err, "group 0")
	require.Equal(t, []float64{2, 3}, scoresOf(srv.Received()))
	dls := readDeadLetters(t, dl)
	require.Len(t, dls, 1)
	require.Equal(t, []float64{1, 1.25}, dls[0].Group.Scores)
	require.Equal(t, "Bad Request", dls[0].Error)
}

func TestSend5xxRetried(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	srv.FailNext("/scored_data", 3, 500, "")
	require.NoError(t, c.Send(context.Background(), group(1, 2)))
	require.Equal(t, 4, srv.RequestCount("/scored_data"))
	require.Len(t, srv.Received(), 1)

	// A weird 200 reply, a truncated body and a dropped connection are retried too.
	srv.FailNext("/scored_data", 1, 200, "")
	srv.AddFault(atropostest.Fault{Path: "/scored_data", Every: 2, Times: 1, Malformed: true})
	srv.AddFault(atropostest.Fault{Path: "/scored_data", Every: 3, Times: 1, Drop: true})
	require.NoError(t, c.Send(context.Background(), group(2, 2)))
	require.Equal(t, []float64{1, 2}, scoresOf(srv.Received()))
	require.Equal(t, 4+4, srv.RequestCount("/scored_data"))
}

func TestSendGivesUpButKeepsSpool(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	c := registered(t, srv, dir, func(c *atropos.ClientConfig) { c.Retry.MaxAttempts = 2 })
	srv.SetError("", 503, "down for maintenance")
	err := c.Send(context.Background(), group(1, 2))
	require.ErrorIs(t, err, atropos.ErrSpooled)
	require.ErrorContains(t, err, "giving up after 2 attempts")
	require.ErrorContains(t, err, "down for maintenance")
	n, err := c.Spooled()
	require.NoError(t, err)
	require.Equal(t, 1, n)

	srv.ClearFaults()
	require.NoError(t, c.Flush(context.Background()))
	require.Equal(t, []float64{1}, scoresOf(srv.Received()))
	n, err = c.Spooled()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestAPIDownThenBack(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	c := registered(t, srv, dir)
	srv.SetDown(true)

	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = c.Send(context.Background(), group(float64(i), 2)) })
	}
	// Every group reaches the spool while the API is down.
	require.Eventually(t, func() bool { k, _ := c.Spooled(); return k == n }, 5*time.Second, time.Millisecond)
	require.Empty(t, srv.Received())
	srv.SetDown(false)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "send %d", i)
	}
	require.Equal(t, []float64{0, 1, 2, 3, 4, 5}, scoresOf(srv.Received()))
	k, err := c.Spooled()
	require.NoError(t, err)
	require.Zero(t, k)
}

func TestRestartWithNonEmptySpool(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	first := registered(t, srv, dir)
	srv.SetDown(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	require.ErrorIs(t, first.Send(ctx, group(1, 2)), atropos.ErrSpooled)
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	require.ErrorIs(t, first.Send(ctx, group(2, 2), group(3, 2)), atropos.ErrSpooled)
	cancel()
	srv.SetDown(false)
	// A stray temporary file of an interrupted write is cleaned up.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".00000000000000000001-000001.jsonl.tmp"), []byte("{"), 0o644))

	// The "restarted process": a new client on the same spool sends the old groups at
	// registration, stamped with its own env id, before anything new.
	second := registered(t, srv, dir)
	require.Equal(t, 1, second.Registration().EnvID)
	got := srv.Received()
	require.Equal(t, []float64{1, 2, 3}, scoresOf(got))
	for _, g := range got {
		require.Equal(t, 1, *g.EnvID)
	}
	require.Equal(t, 1, answered(srv, "/scored_data"))
	require.Equal(t, 1, answered(srv, "/scored_data_list"))
	// The API took them, but no trainer was served them yet: their files stay on disk,
	// not counted as waiting to be sent.
	n, err := second.Spooled()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 3, second.Unserved())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "the two spool files, and no temporary file")
}

func TestCorruptSpoolFileSetAside(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000001-000001.jsonl"), []byte("{not json\n"), 0o644))
	c := newEnv(t, srv, dir)
	err := c.Register(context.Background())
	require.ErrorIs(t, err, atropos.ErrRejected)
	require.ErrorContains(t, err, "unreadable")
	require.FileExists(t, filepath.Join(dir, "00000000000000000001-000001.jsonl.corrupt"))
	require.NotNil(t, c.Registration(), "registration itself succeeded")
}

func TestDisconnect(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	require.NoError(t, c.Send(context.Background(), group(1, 2)))
	require.NoError(t, c.Disconnect(context.Background()))
	require.False(t, srv.Envs()[0].Connected)
	require.Len(t, srv.Queue(), 1, "queued data stays")
	require.ErrorIs(t, c.Send(context.Background(), group(2, 2)), atropos.ErrNotRegistered)
	require.ErrorIs(t, c.Disconnect(context.Background()), atropos.ErrNotRegistered)
}

// TestKilledProcessLosesNothing kills a real env process (this test binary re-run as a
// helper) while its groups are waiting for the API, then starts a new client on the same
// spool: every group is delivered.
func TestKilledProcessLosesNothing(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATROPOS_TEST_HELPER=env", "ATROPOS_URL="+srv.URL(), "ATROPOS_SPOOL="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "helper: %s", stderr.String())
	require.Equal(t, "registered\n", line)
	srv.SetDown(true)
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)

	spooled := func() int {
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".jsonl") && !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return spooled() == 3 }, 10*time.Second, time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Empty(t, srv.Received())

	srv.SetDown(false)
	c := registered(t, srv, dir)
	require.Equal(t, []float64{0, 1, 2}, scoresOf(srv.Received()))
	n, err := c.Spooled()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 3, c.Unserved(), "kept on disk until served")
	for _, g := range srv.Received() {
		require.Equal(t, c.Registration().EnvID, *g.EnvID)
	}
}

func TestFlushSkipsGroupsBeingSent(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir())
	srv.SetDown(true)
	done := make(chan error, 1)
	go func() { done <- c.Send(context.Background(), group(1, 2)) }()
	require.Eventually(t, func() bool { n, _ := c.Spooled(); return n == 1 }, 5*time.Second, time.Millisecond)
	// The file belongs to the running Send: Flush leaves it alone and succeeds at once.
	require.NoError(t, c.Flush(context.Background()))
	srv.SetDown(false)
	require.NoError(t, <-done)
	require.Equal(t, []float64{1}, scoresOf(srv.Received()), "sent once")
}

func TestSendDenseZeroPad(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) { c.Encode.DenseZeroPad = 3 })
	require.NoError(t, c.Send(context.Background(), group(1, 2)))
	g := srv.Received()[0]
	ids, lps := g.DistillRow(0, 0)
	require.Equal(t, []int32{0, 0, 0}, ids)
	require.Equal(t, []float32{0, 0, 0}, lps)
	ids, lps = g.DistillRow(1, 2)
	require.Equal(t, []int32{11, 5, 0}, ids)
	require.Equal(t, []float32{-0.2, -1.8, 0}, lps)
}

// TestRetryMaxBackoffAlone: a MaxBackoff below the default MinBackoff is honoured (the
// minimum shrinks to it) rather than replaced by the 10 s default. Six failures with
// waits of at least 250 ms each could not fit in the deadline.
func TestRetryMaxBackoffAlone(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	c := registered(t, srv, t.TempDir(), func(c *atropos.ClientConfig) {
		c.Retry = atropos.RetryConfig{MaxBackoff: 2 * time.Millisecond}
	})
	srv.FailNext("/scored_data", 6, 503, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, c.Send(ctx, group(1, 2)))
	require.Equal(t, 7, srv.RequestCount("/scored_data"))
}

func TestRetryConfigErrors(t *testing.T) {
	_, err := atropos.NewClient("http://h", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x",
		Retry: atropos.RetryConfig{MinBackoff: time.Second, MaxBackoff: time.Millisecond}})
	require.ErrorContains(t, err, "MaxBackoff 1ms is below MinBackoff 1s")
}
