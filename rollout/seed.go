package rollout

import "context"

type seedKey struct{}

// WithSeed returns ctx carrying a sampling seed: [Agent.Run] under it sends seed with
// every generation request of the rollout ([GenerateRequest.Seed]), so that a server
// that honours seeds (vLLM, vllmtest) samples the same continuation of the same
// prompt again. Give each rollout of a group its own seed: rollouts that share a
// prompt and a seed are the same rollout.
func WithSeed(ctx context.Context, seed int64) context.Context {
	return context.WithValue(ctx, seedKey{}, seed)
}

// seedOf returns the seed of ctx, or nil.
func seedOf(ctx context.Context) *int64 {
	if s, ok := ctx.Value(seedKey{}).(int64); ok {
		return &s
	}
	return nil
}
