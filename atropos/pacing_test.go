package atropos_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentic-opd/agenticopd/atropos"
)

func TestPace(t *testing.T) {
	base := atropos.PacingParams{BatchSize: 16, GroupSize: 4, MaxBatchesOffPolicy: 2, TotalSteps: 100}
	with := func(f func(*atropos.PacingParams)) atropos.PacingParams {
		p := base
		f(&p)
		return p
	}
	half := 0.5
	tests := []struct {
		name    string
		st      atropos.EnvStatus
		p       atropos.PacingParams
		running int
		want    atropos.Decision
	}{
		{"empty queue", atropos.EnvStatus{UnallocatedFraction: 1, MaxGroupSize: 1}, base, 0,
			atropos.Decision{Start: 8}}, // 2×16/4 − 0
		{"running work counts", atropos.EnvStatus{UnallocatedFraction: 1, QueueSize: 3}, base, 2,
			atropos.Decision{Start: 3}}, // 8 − 3 − 2
		{"pause at the threshold", atropos.EnvStatus{UnallocatedFraction: 1, QueueSize: 8}, base, 0,
			atropos.Decision{Pause: true}}, // 8×4 >= 2×16
		{"just under the threshold", atropos.EnvStatus{UnallocatedFraction: 1, QueueSize: 7}, base, 0,
			atropos.Decision{Start: 1}},
		{"never pause when off-policy limit is off", atropos.EnvStatus{UnallocatedFraction: 1, QueueSize: 1000},
			with(func(p *atropos.PacingParams) { p.MaxBatchesOffPolicy = -1; p.MaxWorkers = 5; p.TotalSteps = 0 }), 1,
			atropos.Decision{Start: 4}},
		{"worker cap", atropos.EnvStatus{UnallocatedFraction: 1}, with(func(p *atropos.PacingParams) { p.MaxWorkers = 3 }), 1,
			atropos.Decision{Start: 2}},
		{"stop rule", atropos.EnvStatus{CurrentStep: 100, QueueSize: 4, UnallocatedFraction: 1}, base, 0,
			atropos.Decision{Stop: true, Pause: true}}, // 100 + 4×4/16 > 100
		{"stop rule not yet", atropos.EnvStatus{CurrentStep: 100, QueueSize: 3, UnallocatedFraction: 1}, base, 0,
			atropos.Decision{Start: 5}}, // 100 + 12/16 = 100
		{"unknown batch size", atropos.EnvStatus{}, with(func(p *atropos.PacingParams) { p.BatchSize = -1 }), 0,
			atropos.Decision{Pause: true}},
		{"min allocation keeps its share filling", atropos.EnvStatus{QueueSize: 8, SelfQueueSize: 1, MaxGroupSize: 4, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half }), 0,
			atropos.Decision{Start: 4}}, // no pause: ceil(0.5×16×2/4)×1 − 1 = 3 > 0; refill ceil(((4 + 1)×4 − 4×1/1)/4) = 4 beats 2×16/4 − 8 = 0
		{"min allocation refill counts running work", atropos.EnvStatus{QueueSize: 8, SelfQueueSize: 1, MaxGroupSize: 4, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half }), 3,
			atropos.Decision{Start: 1}},
		{"min allocation refill may exceed the worker cap", atropos.EnvStatus{QueueSize: 8, SelfQueueSize: 1, MaxGroupSize: 4, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half; p.MaxWorkers = 2 }), 1,
			atropos.Decision{Start: 3}}, // as BaseEnv: max(min(2, 0), 4) − 1
		{"at the worker cap nothing starts", atropos.EnvStatus{QueueSize: 8, SelfQueueSize: 1, MaxGroupSize: 4, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half; p.MaxWorkers = 2 }), 2,
			atropos.Decision{}},
		{"min allocation refill with smaller groups in the queue", atropos.EnvStatus{QueueSize: 9, SelfQueueSize: 0, MaxGroupSize: 2, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half }), 0,
			atropos.Decision{Start: 4}}, // no pause although 9×4 >= 32: mgs // gs counts as 1; refill ceil(((8 + 0)×2 − 0)/4) = 4
		{"min allocation share covered", atropos.EnvStatus{QueueSize: 8, SelfQueueSize: 4, MaxGroupSize: 4, UnallocatedFraction: 0.5},
			with(func(p *atropos.PacingParams) { p.MinBatchAllocation = &half }), 0,
			atropos.Decision{Pause: true}},
		{"unallocated fraction shrinks the target", atropos.EnvStatus{UnallocatedFraction: 0.5}, base, 0,
			atropos.Decision{Start: 4}}, // 2×8/4
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := atropos.Pace(tc.st, tc.p, tc.running)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Pace (-want +got):\n%s", diff)
			}
		})
	}
}
