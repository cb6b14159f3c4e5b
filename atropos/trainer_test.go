package atropos_test

import (
	"context"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

func newTrainer(t *testing.T, url string) *atropos.Trainer {
	t.Helper()
	tr, err := atropos.NewTrainer(url, atropos.WithHTTPClient(httpClient(t)))
	require.NoError(t, err)
	return tr
}

func TestTrainerLifecycle(t *testing.T) {
	srv := atropostest.NewServer(t)
	tr := newTrainer(t, srv.URL())
	ctx := context.Background()

	info, err := tr.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, atropos.Info{BatchSize: -1, MaxTokenLen: -1}, info)
	_, err = tr.Batch(ctx)
	require.ErrorIs(t, err, atropos.ErrNotRegistered)
	require.ErrorContains(t, err, "Trainer not registered")

	reg := trainerReg
	reg.StartingStep = 5
	id, err := tr.Register(ctx, reg)
	require.NoError(t, err)
	require.Positive(t, id.Sign()+1)
	require.LessOrEqual(t, id.BitLen(), 128)
	info, err = tr.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, atropos.Info{BatchSize: 8, MaxTokenLen: 64}, info)

	b, err := tr.Batch(ctx) // starts the trainer; nothing queued
	require.NoError(t, err)
	require.Nil(t, b)

	// An env posts 3 batches' worth (12 groups of 2) plus one group.
	env := registered(t, srv, t.TempDir())
	for i := range 13 {
		require.NoError(t, env.Send(ctx, group(float64(i), 2)))
	}
	st, err := tr.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, atropos.Status{CurrentStep: 5, QueueSize: 13}, st)

	// All three batches form at once: the step jumps by 3, batches come newest first.
	var got [][]float64
	for range 3 {
		b, err := tr.Batch(ctx)
		require.NoError(t, err)
		require.Equal(t, 8, atropos.Sequences(b...))
		got = append(got, scoresOf(b))
		st, err := tr.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, atropos.Status{CurrentStep: 8, QueueSize: 1}, st)
	}
	require.Equal(t, [][]float64{{8, 9, 10, 11}, {4, 5, 6, 7}, {0, 1, 2, 3}}, got)
	b, err = tr.Batch(ctx)
	require.NoError(t, err)
	require.Nil(t, b, "one group of 2 is no batch of 8")
}

func TestTrainerBatchDecodesGroups(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	tr := newTrainer(t, srv.URL())
	env := registered(t, srv, t.TempDir())
	want := make([]*atropos.ScoredDataGroup, 4)
	for i := range want {
		want[i] = group(float64(i), 2)
		require.NoError(t, env.Send(context.Background(), want[i]))
		want[i].EnvID = ptr(0)
	}
	b, err := tr.Batch(context.Background())
	require.NoError(t, err)
	require.Len(t, b, 4)
	for i := range want {
		if diff := diffGroups(want[i], b[i]); diff != "" {
			t.Errorf("group %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestTrainerUUIDIsLossless(t *testing.T) {
	const uuid = "340282366920938463463374607431768211455" // 2^128 − 1
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"uuid": ` + uuid + `}`))
	}))
	defer ts.Close()
	id, err := newTrainer(t, ts.URL).Register(context.Background(), trainerReg)
	require.NoError(t, err)
	want, _ := new(big.Int).SetString(uuid, 10)
	require.Zero(t, want.Cmp(id), "got %s", id)
}

func TestTrainerErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		call   func(*atropos.Trainer) error
		want   string
	}{
		{"bad uuid", 200, `{"uuid": 1.5}`, func(tr *atropos.Trainer) error {
			_, err := tr.Register(context.Background(), trainerReg)
			return err
		}, "not an integer"},
		{"422", 422, `{"detail":[{"msg":"Field required","loc":["body","batch_size"]}]}`, func(tr *atropos.Trainer) error {
			_, err := tr.Register(context.Background(), trainerReg)
			return err
		}, "422: Field required (at [body batch_size])"},
		{"500 batch", 500, "Internal Server Error", func(tr *atropos.Trainer) error {
			_, err := tr.Batch(context.Background())
			return err
		}, "GET /batch: 500: Internal Server Error"},
		{"malformed group", 200, `{"batch":[{"tokens":[[1]]}]}`, func(tr *atropos.Trainer) error {
			_, err := tr.Batch(context.Background())
			return err
		}, `missing required key "masks"`},
		{"not JSON", 200, `<html>`, func(tr *atropos.Trainer) error {
			_, err := tr.Status(context.Background())
			return err
		}, "unexpected reply"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer ts.Close()
			require.ErrorContains(t, tc.call(newTrainer(t, ts.URL)), tc.want)
		})
	}
	_, err := atropos.NewTrainer("ftp://x")
	require.ErrorContains(t, err, "want http(s)://host")
	_, err = newTrainer(t, "http://127.0.0.1:1").Register(context.Background(), atropos.TrainerRegistration{})
	require.ErrorContains(t, err, "batch size 0")
}
