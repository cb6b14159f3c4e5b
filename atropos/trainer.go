package atropos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
)

// Trainer is the trainer side of the trajectory API: it registers, then pulls batches.
// It is safe for concurrent use; it does not retry (a trainer's poll loop does).
type Trainer struct {
	api *api
}

// TrainerOption configures a [Trainer].
type TrainerOption func(*trainerOptions)

type trainerOptions struct {
	hc     *http.Client
	logger *slog.Logger
}

// WithHTTPClient sets the HTTP client (default http.DefaultClient).
func WithHTTPClient(hc *http.Client) TrainerOption {
	return func(o *trainerOptions) { o.hc = hc }
}

// WithLogger sets the logger (default: none).
func WithLogger(l *slog.Logger) TrainerOption {
	return func(o *trainerOptions) { o.logger = l }
}

// NewTrainer returns a trainer client for the API at baseURL. It does no I/O.
func NewTrainer(baseURL string, opts ...TrainerOption) (*Trainer, error) {
	var o trainerOptions
	for _, opt := range opts {
		opt(&o)
	}
	a, err := newAPI(baseURL, o.hc, o.logger)
	if err != nil {
		return nil, err
	}
	return &Trainer{api: a}, nil
}

// TrainerRegistration is the body of POST /register; every field is sent.
type TrainerRegistration struct {
	// WandbGroup names the trainer's Weights & Biases run group.
	WandbGroup string `json:"wandb_group"`
	// WandbProject names the trainer's Weights & Biases project.
	WandbProject string `json:"wandb_project"`
	// BatchSize is the number of sequences in each batch the trainer takes.
	BatchSize int `json:"batch_size"`
	// MaxTokenLen is the longest sequence the trainer takes, in tokens.
	MaxTokenLen int `json:"max_token_len"`
	// CheckpointDir is where the trainer saves checkpoints.
	CheckpointDir string `json:"checkpoint_dir"`
	// SaveCheckpointInterval is the number of steps between checkpoints.
	SaveCheckpointInterval int `json:"save_checkpoint_interval"`
	// StartingStep is the step the trainer starts from (0, or a resumed run's).
	StartingStep int `json:"starting_step"`
	// NumSteps is the number of steps the trainer runs.
	NumSteps int `json:"num_steps"`
}

// Register registers the trainer (POST /register) and returns the 128-bit uuid the API
// chose, decoded without loss. Only the first registration configures the API; later
// ones only record another uuid. Envs may register only after the trainer's first
// [Trainer.Batch].
func (t *Trainer) Register(ctx context.Context, r TrainerRegistration) (*big.Int, error) {
	if r.BatchSize < 1 {
		return nil, fmt.Errorf("atropos: Register: batch size %d: want at least 1", r.BatchSize)
	}
	var reply struct {
		UUID json.Number `json:"uuid"`
	}
	if err := t.api.postJSON(ctx, "/register", r, &reply); err != nil {
		return nil, err
	}
	id, ok := new(big.Int).SetString(reply.UUID.String(), 10)
	if !ok {
		return nil, &APIError{Method: http.MethodPost, Path: "/register", Status: http.StatusOK, Message: fmt.Sprintf("uuid %q is not an integer", reply.UUID)}
	}
	return id, nil
}

// Batch polls GET /batch once. It returns the groups of one batch (their sequence
// counts sum to the batch size), or nil and no error when no batch is ready. Before a
// trainer registered, the API answers 200 with an error object; Batch returns an error
// matching [ErrNotRegistered]. The API forms every batch it can at once, moves the step
// counter by that many, and serves them newest first; use [Trainer.Status] for the step.
func (t *Trainer) Batch(ctx context.Context) ([]*ScoredDataGroup, error) {
	var reply struct {
		Status  string          `json:"status"`
		Message string          `json:"message"`
		Batch   json.RawMessage `json:"batch"`
	}
	if err := t.api.do(ctx, http.MethodGet, "/batch", nil, &reply); err != nil {
		return nil, err
	}
	if reply.Status == "error" {
		return nil, fmt.Errorf("%w: GET /batch: %s", ErrNotRegistered, reply.Message)
	}
	if len(reply.Batch) == 0 || string(reply.Batch) == "null" {
		return nil, nil
	}
	var groups []*ScoredDataGroup
	s := newScanner(reply.Batch)
	err := s.list(func(int) error {
		g := new(ScoredDataGroup)
		if err := s.group(g); err != nil {
			return err
		}
		groups = append(groups, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("atropos: GET /batch: %w", err)
	}
	return groups, nil
}

// Status is the reply of GET /status: the trainer step and the number of queued groups
// (not sequences; formed batches waiting to be served are not counted).
type Status struct {
	// CurrentStep is the API's step: the number of batches formed for the trainer.
	CurrentStep int `json:"current_step"`
	// QueueSize is the number of groups queued.
	QueueSize int `json:"queue_size"`
}

// Status reads GET /status.
func (t *Trainer) Status(ctx context.Context) (Status, error) {
	var st Status
	err := t.api.do(ctx, http.MethodGet, "/status", nil, &st)
	return st, err
}

// Info reads GET /info: -1 for both fields before a trainer registered.
func (t *Trainer) Info(ctx context.Context) (Info, error) {
	var info Info
	err := t.api.do(ctx, http.MethodGet, "/info", nil, &info)
	return info, err
}
