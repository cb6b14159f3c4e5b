package vllmtest

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// model is the simulator's language model: a next-token distribution over the whole
// vocabulary that depends on the last three token ids and a seed.
//
// Every logit is base[v] plus a positive boost for a handful of ids picked by the
// context (the corpus successors of the previous token and a few hashed ids). Because
// only a few ids differ from the base, the normaliser, ranks and top-K of one position
// are computed exactly in O(K + boosts + log V), which keeps a 16k-token prompt with
// K = 50 cheap. The model is immutable and safe for concurrent use.
type model struct {
	tok        *tokenizer
	seed       uint64
	base       []float64
	order      []int32   // ids by base logit, highest first
	sortedBase []float64 // base[order[i]]
	maxBase    float64
	zBase      float64   // Σ exp(base - maxBase)
	expBase    []float64 // exp(base[v] - maxBase)
	succ       [][]boost // corpus successors of each id
	ordinary   []int32   // ids the hashed boosts may pick
}

type boost struct {
	id int32
	b  float64
}

const maxBoosts = 12

func newModel(tok *tokenizer, seed uint64) *model {
	V := tok.vocabSize()
	m := &model{tok: tok, seed: seed, base: make([]float64, V), succ: make([][]boost, V)}
	stream := tok.encode(corpus)
	uni := make([]int, V)
	bi := map[[2]int32]int{}
	for i, id := range stream {
		uni[id]++
		if i > 0 {
			bi[[2]int32{stream[i-1], id}]++
		}
	}
	for v := range V {
		j := unitFloat(mix(seed, 0x9e37, uint64(v)))
		switch {
		case int32(v) >= EndOfText && int32(v) < FirstMergeID:
			m.base[v] = -9 + j
		case uni[v] == 0:
			m.base[v] = -3 + j
		default:
			m.base[v] = 0.7*math.Log1p(float64(uni[v])) + 0.5*j
			m.ordinary = append(m.ordinary, int32(v))
		}
	}
	// <|im_end|> gets about 3% of the base mass, so an unscripted turn ends after a
	// few dozen tokens; <|endoftext|> stays a rare alternative stop.
	var z float64
	for v := range V {
		if int32(v) != ImEnd {
			z += math.Exp(m.base[v])
		}
	}
	m.base[ImEnd] = math.Log(0.03 * z)
	m.base[EndOfText] = math.Log(0.0005 * z)

	for p, n := range bi {
		m.succ[p[0]] = append(m.succ[p[0]], boost{p[1], 1 + 1.2*math.Log1p(float64(n))})
	}
	for v := range m.succ {
		s := m.succ[v]
		slices.SortFunc(s, func(a, b boost) int {
			if a.b != b.b {
				if a.b > b.b {
					return -1
				}
				return 1
			}
			return int(a.id - b.id)
		})
		m.succ[v] = s[:min(len(s), 6)]
	}

	m.order = make([]int32, V)
	for v := range V {
		m.order[v] = int32(v)
	}
	slices.SortFunc(m.order, func(a, b int32) int {
		if m.base[a] != m.base[b] {
			if m.base[a] > m.base[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	m.sortedBase = make([]float64, V)
	for i, v := range m.order {
		m.sortedBase[i] = m.base[v]
	}
	m.maxBase = m.sortedBase[0]
	m.expBase = make([]float64, V)
	for v, b := range m.base {
		m.expBase[v] = math.Exp(b - m.maxBase)
		m.zBase += m.expBase[v]
	}
	return m
}

// mix hashes its inputs (splitmix64 finalizer over a running state).
func mix(xs ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func unitFloat(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// dist is the model's distribution at one position.
type dist struct {
	m      *model
	n      int
	bs     [maxBoosts]boost // in the order added until sortBoosts
	sorted bool
	logZ   float64
}

// contextLen is how many ids before a position the model looks at.
const contextLen = 3

// at returns the distribution of the token that follows ids[:i]; only ids[i-3:i]
// matter.
func (m *model) at(ids []int32, i int) dist {
	ctx := [contextLen]int32{-1, -1, -1}
	for k := 0; k < contextLen && i-1-k >= 0; k++ {
		ctx[k] = ids[i-1-k]
	}
	var d dist
	d.m = m
	if ctx[0] >= 0 {
		for _, s := range m.succ[ctx[0]] {
			d.add(s.id, s.b)
		}
	}
	h := mix(m.seed, uint64(int64(ctx[0])), uint64(int64(ctx[1])), uint64(int64(ctx[2])))
	for k := 0; k < 4; k++ {
		h = mix(h, uint64(k))
		id := m.ordinary[h%uint64(len(m.ordinary))]
		d.add(id, 1+4*unitFloat(mix(h, 7)))
	}
	z := m.zBase
	for _, b := range d.bs[:d.n] {
		z += math.Exp(m.base[b.id]+b.b-m.maxBase) - m.expBase[b.id]
	}
	d.logZ = m.maxBase + math.Log(z)
	return d
}

// sortBoosts orders the boosted ids by logit, highest first, as topK needs them; the
// other methods do not depend on the order, so forced tokens are scored without it.
func (d *dist) sortBoosts() {
	if d.sorted {
		return
	}
	d.sorted = true
	m := d.m
	bs := d.bs[:d.n]
	slices.SortFunc(bs, func(a, b boost) int {
		la, lb := m.base[a.id]+a.b, m.base[b.id]+b.b
		if la != lb {
			if la > lb {
				return -1
			}
			return 1
		}
		return int(a.id - b.id)
	})
}

func (d *dist) add(id int32, b float64) {
	for k := range d.bs[:d.n] {
		if d.bs[k].id == id {
			d.bs[k].b += b
			return
		}
	}
	if d.n < maxBoosts {
		d.bs[d.n] = boost{id, b}
		d.n++
	}
}

func (d *dist) boostOf(id int32) (float64, bool) {
	for _, b := range d.bs[:d.n] {
		if b.id == id {
			return b.b, true
		}
	}
	return 0, false
}

func (d *dist) logit(id int32) float64 {
	b, _ := d.boostOf(id)
	return d.m.base[id] + b
}

// logprob is the log-softmax of id.
func (d *dist) logprob(id int32) float64 { return d.logit(id) - d.logZ }

// rank is id's 1-based rank in the vocabulary (1 = most likely).
func (d *dist) rank(id int32) int {
	l := d.logit(id)
	sb := d.m.sortedBase
	n := sort.Search(len(sb), func(i int) bool { return sb[i] <= l })
	for _, b := range d.bs[:d.n] {
		if b.id == id {
			continue
		}
		if d.m.base[b.id] > l {
			n--
		}
		if d.m.base[b.id]+b.b > l {
			n++
		}
	}
	return n + 1
}

// topK appends the k most likely ids, by rank, to out.
func (d *dist) topK(k int, out []int32) []int32 {
	d.sortBoosts()
	bs := d.bs[:d.n]
	bi := 0
	m := d.m
	for _, v := range m.order {
		if len(out) >= k {
			return out
		}
		if _, boosted := d.boostOf(v); boosted {
			continue
		}
		for bi < len(bs) && len(out) < k && m.base[bs[bi].id]+bs[bi].b > m.base[v] {
			out = append(out, bs[bi].id)
			bi++
		}
		if len(out) < k {
			out = append(out, v)
		}
	}
	for bi < len(bs) && len(out) < k {
		out = append(out, bs[bi].id)
		bi++
	}
	return out
}

// sample draws the next id. temperature 0 is greedy; topP in (0,1] keeps the smallest
// set of most likely ids whose mass reaches topP.
func (d *dist) sample(temperature, topP float64, rng *rand.Rand, buf []float64) int32 {
	if temperature <= 0 {
		return d.topK(1, nil)[0]
	}
	m := d.m
	V := len(m.base)
	maxL := math.Inf(-1)
	logits := buf[:V]
	copy(logits, m.base)
	for _, b := range d.bs[:d.n] {
		logits[b.id] += b.b
	}
	for _, l := range logits {
		maxL = max(maxL, l)
	}
	if topP > 0 && topP < 1 {
		ids := byLogit(logits)
		var total float64
		w := make([]float64, V)
		for i, v := range ids {
			w[i] = math.Exp((logits[v] - maxL) / temperature)
			total += w[i]
		}
		var cum float64
		cut := V
		for i := range ids {
			cum += w[i]
			if cum >= topP*total {
				cut = i + 1
				break
			}
		}
		r := rng.Float64() * cum
		for i := 0; i < cut; i++ {
			r -= w[i]
			if r < 0 {
				return ids[i]
			}
		}
		return ids[cut-1]
	}
	var total float64
	for v, l := range logits {
		logits[v] = math.Exp((l - maxL) / temperature)
		total += logits[v]
	}
	r := rng.Float64() * total
	for v, w := range logits {
		r -= w
		if r < 0 {
			return int32(v)
		}
	}
	return int32(V - 1)
}

// isStop reports whether id ends a turn (vLLM stops on either id of Qwen's eos list).
func isStop(id int32) bool { return id == ImEnd || id == EndOfText }

// continuation is one generated (or scripted) sequence.
type continuation struct {
	ids      []int32
	logprobs []float64
	finish   string // "stop" or "length"
}

// generate samples up to maxTokens ids after prompt.
func (m *model) generate(prompt []int32, maxTokens int, p samplerParams, rng *rand.Rand) continuation {
	seq := slices.Clip(prompt)
	buf := make([]float64, len(m.base))
	var c continuation
	for len(c.ids) < maxTokens {
		d := m.at(seq, len(seq))
		var id int32
		if p.plain() {
			id = d.sample(p.temperature, p.topP, rng, buf)
		} else {
			id = d.sampleFull(p, seq, len(c.ids), rng, buf)
		}
		seq = append(seq, id)
		c.ids = append(c.ids, id)
		c.logprobs = append(c.logprobs, d.logprob(id))
		if isStop(id) {
			c.finish = "stop"
			return c
		}
	}
	c.finish = "length"
	return c
}

// force scores ids as if they had been generated after prompt, cut at maxTokens.
func (m *model) force(prompt, ids []int32, maxTokens int) continuation {
	c := continuation{finish: "stop"}
	if len(ids) > maxTokens {
		ids = ids[:maxTokens]
		c.finish = "length"
	}
	seq := contextTail(prompt, ids)
	at := len(seq) - len(ids)
	c.ids = slices.Clone(ids)
	for k := range ids {
		d := m.at(seq, at+k)
		c.logprobs = append(c.logprobs, d.logprob(ids[k]))
	}
	if c.finish == "stop" && (len(ids) == 0 || !isStop(ids[len(ids)-1])) {
		c.finish = "length"
	}
	return c
}

// byLogit returns the token ids ordered by logit, highest first, ties by id.
func byLogit(logits []float64) []int32 {
	ids := make([]int32, len(logits))
	for v := range ids {
		ids[v] = int32(v)
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if logits[a] != logits[b] {
			if logits[a] > logits[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	return ids
}
