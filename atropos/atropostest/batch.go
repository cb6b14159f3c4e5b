package atropostest

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"

	"github.com/agentic-opd/agenticopd/atropos"
)

func (s *Server) handleBatch(*http.Request, []byte) reply {
	if !s.st.trainerInit && !s.st.everReset {
		return jsonReply(map[string]any{"status": "error", "message": "Trainer not registered. Call /register first.", "batch": []any{}})
	}
	s.st.started = true // even after a reset, when the next step fails
	if len(s.st.currBatch) == 0 && !s.st.queueExists {
		return internalError() // after a reset: the queue is gone until /register or data
	}
	if len(s.st.currBatch) == 0 {
		for {
			b := s.formBatch()
			if b == nil {
				break
			}
			s.st.currBatch = append(s.st.currBatch, b)
			s.st.step++
		}
	}
	if len(s.st.currBatch) == 0 {
		return reply{status: 200, body: []byte(`{"batch":null}`)}
	}
	last := len(s.st.currBatch) - 1
	b := s.st.currBatch[last]
	s.st.currBatch = s.st.currBatch[:last]
	var buf bytes.Buffer
	buf.WriteString(`{"batch":[`)
	groups := make([]*atropos.ScoredDataGroup, len(b))
	for i, e := range b {
		if i > 0 {
			buf.WriteByte(',')
		}
		js, err := e.g.AppendJSON(nil, nil)
		if err != nil {
			return internalError() // upstream: NaN in a group loses the batch
		}
		buf.Write(js)
		groups[i] = e.g
	}
	buf.WriteString(`]}`)
	s.served = append(s.served, groups)
	return reply{status: 200, body: buf.Bytes()}
}

// formBatch takes one batch off the queue, or returns nil. Called with s.mu held.
func (s *Server) formBatch() []*entry {
	if len(s.st.queue) == 0 {
		return nil
	}
	for _, e := range s.st.envs {
		if e.minAlloc != nil {
			if b, ok := s.minAllocBatch(); ok {
				return b
			}
			return nil
		}
	}
	b, rest := exactBatch(s.st.queue, s.st.batchSize)
	if b != nil {
		s.st.queue = rest
	}
	return b
}

// packable returns the indexes (into es) of the groups that complete packs of maxSize
// sequences, in completion order: groups are bucketed by size in FIFO order and a
// bucket of size n becomes a pack when it holds maxSize/n groups.
func packable(es []*entry, maxSize int) []int {
	buckets := map[int][]int{}
	var out []int
	for i, e := range es {
		buckets[e.n] = append(buckets[e.n], i)
		if len(buckets[e.n])*e.n == maxSize {
			out = append(out, buckets[e.n]...)
			buckets[e.n] = nil
		}
	}
	return out
}

func maxSize(es []*entry) int {
	m := 0
	for _, e := range es {
		m = max(m, e.n)
	}
	return m
}

// exactBatch forms one batch of exactly batchSize sequences from whole packs in queue
// order, or returns nil and leaves the queue as it is.
func exactBatch(queue []*entry, batchSize int) ([]*entry, []*entry) {
	if seqs(queue) < batchSize || batchSize <= 0 {
		return nil, queue
	}
	idx := packable(queue, maxSize(queue))
	var batch []*entry
	take := map[int]bool{}
	total := 0
	for _, i := range idx {
		if total >= batchSize {
			break
		}
		batch = append(batch, queue[i])
		take[i] = true
		total += queue[i].n
	}
	if total != batchSize {
		return nil, queue
	}
	return batch, without(queue, take)
}

func without(queue []*entry, take map[int]bool) []*entry {
	rest := make([]*entry, 0, len(queue)-len(take))
	for i, e := range queue {
		if !take[i] {
			rest = append(rest, e)
		}
	}
	return rest
}

// minAllocBatch forms one batch honouring the envs' minimum allocations; ok is false
// when no batch can be formed. With no connected env holding a minimum it falls back to
// exactBatch. Called with s.mu held.
func (s *Server) minAllocBatch() ([]*entry, bool) {
	bs := s.st.batchSize
	var minEnvs []int
	for id, e := range s.st.envs {
		if e.connected && e.minAlloc != nil {
			minEnvs = append(minEnvs, id)
		}
	}
	if len(minEnvs) == 0 {
		b, rest := exactBatch(s.st.queue, bs)
		if b == nil {
			return nil, false
		}
		s.st.queue = rest
		return b, true
	}
	M := maxSize(s.st.queue)
	// Packs per env, as queue indexes in completion order.
	perEnv := map[int][]int{}
	byEnv := map[int][]int{}
	for i, e := range s.st.queue {
		if e.envID != nil {
			byEnv[*e.envID] = append(byEnv[*e.envID], i)
		}
	}
	for id, qidx := range byEnv {
		es := make([]*entry, len(qidx))
		for j, qi := range qidx {
			es[j] = s.st.queue[qi]
		}
		for _, j := range packable(es, M) {
			perEnv[id] = append(perEnv[id], qidx[j])
		}
	}
	// Minimums in sequences, for the envs whose minimum is positive, by env id.
	mins := map[int]int{}
	var order []int
	sum := 0
	for _, id := range minEnvs {
		m := int(float64(bs) * *s.st.envs[id].minAlloc)
		if m <= 0 {
			continue
		}
		if len(perEnv[id]) == 0 {
			return nil, false // a reserved env has nothing packable: starve
		}
		mins[id] = m
		order = append(order, id)
		sum += m
	}
	if sum > bs {
		scale := float64(bs) / float64(sum)
		for _, id := range order {
			smallest := math.MaxInt
			for _, qi := range perEnv[id] {
				smallest = min(smallest, s.st.queue[qi].n)
			}
			mins[id] = max(smallest, int(float64(mins[id])*scale))
		}
	}
	take := map[int]bool{}
	var batch []*entry
	total := 0
	for _, id := range order {
		got := 0
		for _, qi := range perEnv[id] {
			if got >= mins[id] {
				break
			}
			if n := s.st.queue[qi].n; total+n <= bs {
				take[qi] = true
				batch = append(batch, s.st.queue[qi])
				got += n
				total += n
			}
		}
	}
	packed := map[int]bool{}
	for _, idx := range perEnv {
		for _, qi := range idx {
			packed[qi] = true
		}
	}
	for qi := range s.st.queue {
		if total == bs {
			break
		}
		if n := s.st.queue[qi].n; packed[qi] && !take[qi] && total+n <= bs {
			take[qi] = true
			batch = append(batch, s.st.queue[qi])
			total += n
		}
	}
	if total != bs {
		return nil, false
	}
	s.st.queue = without(s.st.queue, take)
	return batch, true
}

func (s *Server) handleStatusEnv(r *http.Request, body []byte) reply {
	if len(bytes.TrimSpace(body)) == 0 {
		return validation422([]any{"body"}, "Field required")
	}
	var req struct {
		EnvID *int `json:"env_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.EnvID == nil {
		return validation422([]any{"body", "env_id"}, "Field required")
	}
	if *req.EnvID < 0 || *req.EnvID >= len(s.st.envs) {
		return internalError()
	}
	st, ok := s.statusEnv(*req.EnvID)
	if !ok {
		return internalError()
	}
	return jsonReply(st)
}

// statusEnv computes /status-env for env id R; ok is false where upstream divides by
// zero (no connected weight, or a group size of 0). Called with s.mu held.
func (s *Server) statusEnv(R int) (atropos.EnvStatus, bool) {
	envs := s.st.envs
	env := envs[R]
	den := 0.0
	for _, e := range envs {
		if e.connected {
			den += float64(e.maxContextLen) * max(0, e.weight)
		}
	}
	if den == 0 {
		return atropos.EnvStatus{}, false
	}
	weight := max(0.01, float64(env.maxContextLen)*env.weight/den)
	minSum := 0.0
	for _, e := range envs {
		if e.connected && e.minAlloc != nil {
			minSum += *e.minAlloc
		}
	}
	mgs := max(1, maxSize(s.st.queue))
	// Sequences of R, and of every other env id; groups without an env id count as one
	// more "env" (upstream keys them by None), with no reserved minimum.
	const noEnv = -1 << 62
	self := 0
	others := map[int]int{}
	g := env.groupSize
	for _, e := range s.st.queue {
		switch {
		case e.envID != nil && *e.envID == R:
			self += e.n
			g = max(g, e.n)
		case e.envID != nil:
			others[*e.envID] += e.n
		default:
			others[noEnv] += e.n
		}
	}
	env.groupSize = g // written back, as upstream
	if g == 0 {
		return atropos.EnvStatus{}, false // upstream divides by the group size
	}
	q := self
	if mgs > 1 {
		for id, n := range others {
			reserved := 0
			if id >= 0 && id < len(envs) && envs[id].connected && envs[id].minAlloc != nil {
				reserved = int(float64(s.st.batchSize) * *envs[id].minAlloc)
			}
			q += max(0, (n+mgs-1)/mgs*mgs-reserved)
		}
	}
	return atropos.EnvStatus{
		CurrentStep: s.st.step, QueueSize: q / g, UnallocatedFraction: 1 - min(1, minSum),
		SelfQueueSize: self / g, MaxGroupSize: mgs, EnvWeight: weight,
	}, true
}
