package atropostest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/agentic-opd/agenticopd/atropos"
)

// decodeObject decodes a JSON object body and checks required keys, answering 422 like
// FastAPI otherwise.
func decodeObject(body []byte, required ...string) (map[string]json.RawMessage, reply) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, validation422([]any{"body"}, "Field required")
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, validation422([]any{"body"}, "JSON decode error: "+err.Error())
	}
	for _, k := range required {
		if v, ok := m[k]; !ok || string(v) == "null" {
			return nil, validation422([]any{"body", k}, "Field required")
		}
	}
	return m, reply{}
}

func (s *Server) handleRegister(_ *http.Request, body []byte) reply {
	var reg atropos.TrainerRegistration
	m, rep := decodeObject(body, "wandb_group", "wandb_project", "batch_size", "max_token_len",
		"checkpoint_dir", "save_checkpoint_interval", "starting_step", "num_steps")
	if m == nil {
		return rep
	}
	if err := json.Unmarshal(body, &reg); err != nil {
		return validation422([]any{"body"}, err.Error())
	}
	id := s.registerTrainer(reg)
	return reply{status: 200, body: fmt.Appendf(nil, `{"uuid":%s}`, id.String())}
}

// registerTrainer runs /register. Called with s.mu held (or before serving).
func (s *Server) registerTrainer(reg atropos.TrainerRegistration) *big.Int {
	if !s.st.queueExists {
		s.st.queueExists = true
		s.st.trainerInit = true
		s.st.queue = nil
		s.st.buffer = map[int][]*entry{}
		s.st.envs = nil
		s.st.currBatch = nil
		s.st.started = false
		s.st.batchSize = reg.BatchSize
		s.st.maxTokenLen = reg.MaxTokenLen
		s.st.step = reg.StartingStep
		g, p := reg.WandbGroup, reg.WandbProject
		s.st.wandbGroup, s.st.wandbProject = &g, &p
		s.st.checkpointDir = reg.CheckpointDir
		s.st.saveInterval = reg.SaveCheckpointInterval
		s.st.numSteps = reg.NumSteps
	}
	id, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	s.st.requesters = append(s.st.requesters, id)
	return id
}

func (s *Server) handleRegisterEnv(_ *http.Request, body []byte) reply {
	m, rep := decodeObject(body, "max_token_length", "desired_name", "weight", "group_size")
	if m == nil {
		return rep
	}
	var req struct {
		MaxTokenLength     int      `json:"max_token_length"`
		DesiredName        string   `json:"desired_name"`
		Weight             float64  `json:"weight"`
		GroupSize          int      `json:"group_size"`
		MinBatchAllocation *float64 `json:"min_batch_allocation"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return validation422([]any{"body"}, err.Error())
	}
	if !s.st.started {
		return jsonReply(map[string]string{"status": "wait for trainer to start"})
	}
	same := 0
	for _, e := range s.st.envs {
		if e.desiredName == req.DesiredName {
			same++
		}
	}
	e := &envState{
		maxContextLen: req.MaxTokenLength, weight: req.Weight, desiredName: req.DesiredName,
		realName: fmt.Sprintf("%s_%d", req.DesiredName, same), connected: true,
		minAlloc: req.MinBatchAllocation, groupSize: req.GroupSize, lastUpdate: time.Now(),
	}
	s.st.envs = append(s.st.envs, e)
	return jsonReply(map[string]any{
		"status": "success", "env_id": len(s.st.envs) - 1, "wandb_name": e.realName,
		"checkpoint_dir": s.st.checkpointDir, "starting_step": s.st.step,
		"checkpoint_interval": s.st.saveInterval, "num_steps": s.st.numSteps,
	})
}

func (s *Server) handleDisconnect(_ *http.Request, body []byte) reply {
	m, rep := decodeObject(body, "env_id")
	if m == nil {
		return rep
	}
	var id int
	if err := json.Unmarshal(m["env_id"], &id); err != nil {
		return validation422([]any{"body", "env_id"}, "Input should be a valid integer")
	}
	if id < 0 || id >= len(s.st.envs) {
		return jsonReply(map[string]string{"status": "failure", "error": "list index out of range"})
	}
	s.st.envs[id].connected = false
	return jsonReply(map[string]string{"status": "success"})
}

func (s *Server) handleWandbInfo(*http.Request, []byte) reply {
	return jsonReply(map[string]*string{"group": s.st.wandbGroup, "project": s.st.wandbProject})
}

func (s *Server) handleInfo(*http.Request, []byte) reply {
	return jsonReply(map[string]int{"batch_size": s.st.batchSize, "max_token_len": s.st.maxTokenLen})
}

func (s *Server) handleStatus(*http.Request, []byte) reply {
	if !s.st.queueExists || !s.st.trainerInit && !s.st.everReset { // upstream: no queue or no step counter
		return jsonReply(map[string]int{"current_step": 0, "queue_size": 0})
	}
	return jsonReply(map[string]int{"current_step": s.st.step, "queue_size": len(s.st.queue)})
}

func (s *Server) handleReset(*http.Request, []byte) reply {
	s.reset()
	return reply{status: 200, body: []byte("Reset successful"), text: true}
}

// reset acts as upstream's /reset_data. Without a queue it changes nothing (upstream's
// first step, deleting the queue, fails and the rest is skipped). Otherwise it drops the
// queue, buffers, envs, formed batches and uuids, sets batch size and num_steps to -1 and
// the step to 0; max_token_len, the checkpoint fields and the latest example survive.
// Called with s.mu held.
func (s *Server) reset() {
	if !s.st.queueExists {
		return
	}
	old := s.st
	s.st = freshState()
	s.st.maxTokenLen = old.maxTokenLen
	s.st.checkpointDir = old.checkpointDir
	s.st.saveInterval = old.saveInterval
	s.st.latest = old.latest
	s.st.numSteps = -1
	s.st.everReset = true
}

func (s *Server) handleLatest(*http.Request, []byte) reply {
	if s.st.latest == nil {
		return reply{status: 200, body: []byte(`{"tokens":[],"masks":[],"scores":[],"advantages":[],"ref_logprobs":[],"generation_params":[],"inference_logprobs":[],"messages":[],"images":[]}`)}
	}
	b, err := s.st.latest.g.MarshalJSON()
	if err != nil {
		return internalError()
	}
	return reply{status: 200, body: b}
}

// parseGroup decodes one posted group, answering 422 like pydantic on failure.
func parseGroup(raw []byte, loc ...any) (*atropos.ScoredDataGroup, reply) {
	var overrides struct {
		Overrides []json.RawMessage `json:"overrides"`
	}
	if json.Unmarshal(raw, &overrides) == nil {
		for i, o := range overrides.Overrides {
			if string(o) == "null" {
				return nil, validation422(append(append([]any{}, loc...), "overrides", i), "Input should be a valid dictionary")
			}
		}
	}
	var probe struct {
		Messages [][]map[string]json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(raw, &probe) == nil {
		for i, seq := range probe.Messages {
			for j, m := range seq {
				_, hasRole := m["role"]
				_, hasContent := m["content"]
				if !hasRole || !hasContent {
					return nil, validation422(append(append([]any{}, loc...), "messages", i, j), "Value error, Message must have 'role' and 'content' fields")
				}
			}
		}
	}
	g := new(atropos.ScoredDataGroup)
	if err := g.UnmarshalJSON(raw); err != nil {
		return nil, validation422(loc, err.Error())
	}
	return g, reply{}
}

func (s *Server) handleScoredData(_ *http.Request, body []byte) reply {
	g, rep := parseGroup(body, "body")
	if g == nil {
		return rep
	}
	buffered, size := s.ingest(g)
	if buffered {
		return jsonReply(map[string]any{"status": "buffered", "buffer_size": size})
	}
	return jsonReply(map[string]string{"status": "received"})
}

func (s *Server) handleScoredDataList(_ *http.Request, body []byte) reply {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return validation422([]any{"body"}, "Input should be a valid list")
	}
	groups := make([]*atropos.ScoredDataGroup, len(raws))
	for i, raw := range raws {
		g, rep := parseGroup(raw, "body", i)
		if g == nil {
			return rep
		}
		groups[i] = g
	}
	out := map[string]any{"status": "received", "groups_processed": len(groups)}
	nbuf, last := 0, 0
	for _, g := range groups {
		if b, size := s.ingest(g); b {
			nbuf++
			last = size
		}
	}
	if nbuf > 0 {
		out["buffered"] = nbuf
		out["last_buffer_size"] = last
	}
	return jsonReply(out)
}

// ingest queues or buffers one group and reports whether it was buffered, with the
// env's remaining buffer size. Called with s.mu held.
func (s *Server) ingest(g *atropos.ScoredDataGroup) (bool, int) {
	s.received = append(s.received, g)
	s.st.queueExists = true // data before a trainer registered creates the queue: the wedge
	e := &entry{g: g, n: g.Len(), envID: g.EnvID}
	if e.envID != nil && *e.envID >= 0 && *e.envID < len(s.st.envs) && e.n != s.st.envs[*e.envID].groupSize {
		id := *e.envID
		buf := append(s.st.buffer[id], e)
		pick := exactSubset(buf, s.st.envs[id].groupSize)
		if pick != nil {
			var rest []*entry
			for i, b := range buf {
				if pick[i] {
					s.st.queue = append(s.st.queue, b)
					s.st.latest = b
				} else {
					rest = append(rest, b)
				}
			}
			buf = rest
		}
		s.st.buffer[id] = buf
		return true, seqs(buf)
	}
	s.st.queue = append(s.st.queue, e)
	s.st.latest = e
	return false, 0
}

// exactSubset returns which buffered groups to release so that their sizes sum to
// target, or nil when none do. As upstream: first greedily in FIFO order; failing that,
// a reachability table over prefixes of the buffer, walked back from the newest group,
// taking a group whenever the groups before it can still make up the rest (so this
// search favours newer groups, although upstream's comment says earlier ones).
func exactSubset(buf []*entry, target int) []bool {
	if target < 0 {
		return nil // upstream fails with a 500 here; the fake just keeps buffering
	}
	pick := make([]bool, len(buf))
	sum := 0
	for i, e := range buf {
		if sum+e.n <= target {
			pick[i] = true
			sum += e.n
			if sum == target {
				return pick
			}
		}
	}
	clear(pick)
	// can[i][j]: some subset of buf[:i] has j sequences.
	can := make([][]bool, len(buf)+1)
	for i := range can {
		can[i] = make([]bool, target+1)
	}
	can[0][0] = true
	for i := 1; i <= len(buf); i++ {
		n := buf[i-1].n
		for j := range target + 1 {
			can[i][j] = can[i-1][j] || j >= n && can[i-1][j-n]
		}
	}
	if !can[len(buf)][target] {
		return nil
	}
	left, picked := target, false
	for i := len(buf); i >= 1; i-- {
		if n := buf[i-1].n; left >= n && can[i-1][left-n] {
			pick[i-1], picked = true, true
			left -= n
		}
	}
	if !picked {
		return nil // upstream releases nothing for an empty pick
	}
	return pick
}

func seqs(es []*entry) int {
	n := 0
	for _, e := range es {
		n += e.n
	}
	return n
}
