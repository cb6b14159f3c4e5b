package atropos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// ErrNonFinite reports a NaN or ±Inf value: JSON cannot carry it, and the API would accept
// it from Python and then lose a whole batch.
var ErrNonFinite = errors.New("atropos: NaN or Inf value")

// EncodeOptions change how groups are encoded. The zero value writes the compact, exact
// form.
type EncodeOptions struct {
	// DenseZeroPad, when positive, writes the distill rows in the fixed L×K layout of the
	// hermes OPD environment with K = DenseZeroPad (see [DistillRows.DenseZeroPad]).
	DenseZeroPad int
}

// flushSize is the buffer size at which a streaming encoder hands bytes to its writer.
const flushSize = 64 << 10

// jsonWriter appends JSON to buf and, when w is set, flushes it to w in chunks.
type jsonWriter struct {
	buf []byte
	w   io.Writer
	err error
}

func (jw *jsonWriter) maybeFlush() {
	if jw.w != nil && len(jw.buf) >= flushSize {
		jw.flush()
	}
}

func (jw *jsonWriter) flush() {
	if jw.w == nil || jw.err != nil || len(jw.buf) == 0 {
		return
	}
	_, jw.err = jw.w.Write(jw.buf)
	jw.buf = jw.buf[:0]
}

// MarshalJSON encodes g with all 14 keys. It fails with [ErrNonFinite] for NaN or ±Inf
// and when a raw message or the images payload is not valid JSON.
func (g *ScoredDataGroup) MarshalJSON() ([]byte, error) {
	return g.AppendJSON(nil, nil)
}

// AppendJSON appends the JSON encoding of g to dst, as [ScoredDataGroup.MarshalJSON]
// does; opts may be nil. dst is first grown, at most once, to hold the encoding: a
// buffer kept from an earlier group of the same shape is written without allocating.
func (g *ScoredDataGroup) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	k := 0
	if opts != nil {
		k = opts.DenseZeroPad
	}
	dst = slices.Grow(dst, g.sizeHint(k))
	jw := jsonWriter{buf: dst}
	if err := g.encode(&jw, opts); err != nil {
		return dst, err
	}
	return jw.buf, nil
}

func (g *ScoredDataGroup) encode(jw *jsonWriter, opts *EncodeOptions) error {
	if opts == nil {
		opts = &EncodeOptions{}
	}
	jw.buf = append(jw.buf, `{"tokens":`...)
	jw.intMatrix(g.Tokens)
	jw.buf = append(jw.buf, `,"masks":`...)
	jw.intMatrix(g.Masks)
	jw.buf = append(jw.buf, `,"scores":`...)
	if err := jw.floats(g.Scores, "scores", -1); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"advantages":`...)
	if err := jw.floatMatrix(g.Advantages, "advantages"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"ref_logprobs":`...)
	if err := jw.floatMatrix(g.RefLogprobs, "ref_logprobs"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"messages":`...)
	if err := jw.messages(g.Messages); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"generation_params":`...)
	if err := jw.value(g.GenerationParams, g.GenerationParams == nil, "generation_params"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"inference_logprobs":`...)
	if err := jw.floatMatrix(g.InferenceLogprobs, "inference_logprobs"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"overrides":`...)
	if err := jw.value(g.Overrides, g.Overrides == nil, "overrides"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"group_overrides":`...)
	if err := jw.value(g.GroupOverrides, g.GroupOverrides == nil, "group_overrides"); err != nil {
		return err
	}
	jw.buf = append(jw.buf, `,"images":`...)
	if err := jw.raw(g.Images); err != nil {
		return invalidJSON("images", err)
	}
	jw.buf = append(jw.buf, `,"env_id":`...)
	if g.EnvID == nil {
		jw.buf = append(jw.buf, "null"...)
	} else {
		jw.buf = strconv.AppendInt(jw.buf, int64(*g.EnvID), 10)
	}
	jw.buf = append(jw.buf, `,"distill_token_ids":`...)
	jw.distillIDs(g.Distill, opts.DenseZeroPad)
	jw.buf = append(jw.buf, `,"distill_logprobs":`...)
	if err := jw.distillLogprobs(g.Distill, opts.DenseZeroPad); err != nil {
		return err
	}
	jw.buf = append(jw.buf, '}')
	return jw.err
}

// list writes a JSON list of n elements, elem writing element i, and lets the writer
// flush after each element. It stops at the first error elem returns.
func (jw *jsonWriter) list(n int, elem func(i int) error) error {
	jw.buf = append(jw.buf, '[')
	for i := range n {
		if i > 0 {
			jw.buf = append(jw.buf, ',')
		}
		if err := elem(i); err != nil {
			return err
		}
		jw.maybeFlush()
	}
	jw.buf = append(jw.buf, ']')
	return nil
}

func (jw *jsonWriter) intMatrix(m [][]int) {
	if m == nil {
		jw.buf = append(jw.buf, "[]"...) // required fields are never null
		return
	}
	// A row is written whole: a streaming encoder's buffer then holds at most the text
	// of one sequence's tokens beyond flushSize, less than the sequence takes in memory.
	_ = jw.list(len(m), func(i int) error {
		jw.buf = jsonscan.AppendInts(jw.buf, m[i])
		return nil
	})
}

// floats writes a list of float64 values; seq is the sequence index for errors or -1.
func (jw *jsonWriter) floats(v []float64, field string, seq int) error {
	if v == nil && seq < 0 {
		jw.buf = append(jw.buf, "[]"...)
		return nil
	}
	jw.buf = append(jw.buf, '[')
	for j, f := range v {
		if j > 0 {
			jw.buf = append(jw.buf, ',')
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if seq < 0 {
				return fmt.Errorf("%w: %s[%d] = %v", ErrNonFinite, field, j, f)
			}
			return fmt.Errorf("%w: %s[%d][%d] = %v", ErrNonFinite, field, seq, j, f)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 && !(f == 0 && math.Signbit(f)) {
			// An integer float64 (MaskedLogprob, most of inference_logprobs) is its own
			// shortest form below 2^53, where float64s are at most 1 apart.
			jw.buf = strconv.AppendInt(jw.buf, int64(f), 10)
		} else {
			jw.buf = jsonscan.AppendFloat64(jw.buf, f)
		}
		if j&1023 == 1023 {
			jw.maybeFlush()
		}
	}
	jw.buf = append(jw.buf, ']')
	return nil
}

func (jw *jsonWriter) floatMatrix(m [][]float64, field string) error {
	if m == nil {
		jw.buf = append(jw.buf, "null"...)
		return nil
	}
	return jw.list(len(m), func(i int) error { return jw.floats(m[i], field, i) })
}

func (jw *jsonWriter) messages(m [][]json.RawMessage) error {
	if m == nil {
		jw.buf = append(jw.buf, "null"...)
		return nil
	}
	return jw.list(len(m), func(i int) error {
		return jw.list(len(m[i]), func(j int) error {
			if err := jw.raw(m[i][j]); err != nil {
				return invalidJSON(fmt.Sprintf("messages[%d][%d]", i, j), err)
			}
			return nil
		})
	})
}

// raw writes a raw JSON value compacted onto one line (JSONL needs it), null when empty,
// and returns json.Compact's error for a value that is not valid JSON. jsonscan's
// compactor writes what json.Compact writes, in a fifth of its time on a chat message;
// json.Compact runs only for a value the compactor refuses, to give its error.
func (jw *jsonWriter) raw(v json.RawMessage) error {
	if len(v) == 0 {
		jw.buf = append(jw.buf, "null"...)
		return nil
	}
	if b, ok := jsonscan.AppendCompact(jw.buf, v); ok {
		jw.buf = b
		return nil
	}
	b := bytes.NewBuffer(jw.buf)
	if err := json.Compact(b, v); err != nil {
		return err
	}
	jw.buf = b.Bytes()
	return nil
}

// invalidJSON reports that the raw value field is not valid JSON.
func invalidJSON(field string, err error) error {
	return fmt.Errorf("atropos: %s: invalid JSON: %w", field, err)
}

// value writes a free-form value with encoding/json (keys sorted), null when isNil.
func (jw *jsonWriter) value(v any, isNil bool, field string) error {
	if isNil {
		jw.buf = append(jw.buf, "null"...)
		return nil
	}
	b, err := marshalValue(v, field)
	if err != nil {
		return err
	}
	jw.buf = append(jw.buf, b...)
	return nil
}

// marshalValue encodes a free-form value with encoding/json, reporting NaN and ±Inf as
// [ErrNonFinite].
func marshalValue(v any, field string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		var uv *json.UnsupportedValueError
		if errors.As(err, &uv) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNonFinite, field, err)
		}
		return nil, fmt.Errorf("atropos: %s: %w", field, err)
	}
	return b, nil
}

// distill writes d as one list per sequence of one list per position, row writing the
// list of position pos of sequence i; null when d is nil.
func (jw *jsonWriter) distill(d []*DistillRows, row func(i, pos int, r *DistillRows) error) error {
	if d == nil {
		jw.buf = append(jw.buf, "null"...)
		return nil
	}
	return jw.list(len(d), func(i int) error {
		r := d[i]
		return jw.list(r.Len(), func(pos int) error { return row(i, pos, r) })
	})
}

func (jw *jsonWriter) distillIDs(d []*DistillRows, k int) {
	_ = jw.distill(d, func(_, pos int, r *DistillRows) error {
		ids, _ := r.Row(pos)
		ids = ids[:keep(len(ids), k)]
		jw.buf = jsonscan.AppendInts(jw.buf, ids)
		jw.pad(len(ids), k)
		return nil
	})
}

func (jw *jsonWriter) distillLogprobs(d []*DistillRows, k int) error {
	return jw.distill(d, func(i, pos int, r *DistillRows) error {
		_, lps := r.Row(pos)
		lps = lps[:keep(len(lps), k)]
		var bad int
		if jw.buf, bad = jsonscan.AppendFloat32s(jw.buf, lps); bad >= 0 {
			return nonFiniteDistill(i, pos, bad, float64(lps[bad]))
		}
		jw.pad(len(lps), k)
		return nil
	})
}

// keep is how many of a distill row's n entries are written: all, or the first k
// when DenseZeroPad is k.
func keep(n, k int) int {
	if k > 0 {
		return min(n, k)
	}
	return n
}

// pad writes the zeros that fill a distill row of n entries, just written, to k
// entries (DenseZeroPad) before its closing bracket.
func (jw *jsonWriter) pad(n, k int) {
	if k <= n {
		return
	}
	jw.buf = jw.buf[:len(jw.buf)-1] // the closing bracket
	for j := n; j < k; j++ {
		if j > 0 {
			jw.buf = append(jw.buf, ',')
		}
		jw.buf = append(jw.buf, '0')
	}
	jw.buf = append(jw.buf, ']')
}

func nonFiniteDistill(i, pos, j int, f float64) error {
	return fmt.Errorf("%w: distill_logprobs[%d][%d][%d] = %v", ErrNonFinite, i, pos, j, f)
}

// checkEncodable reports the first error encode would meet other than a write error, so
// that a streaming encoder can refuse a group before writing any of it. k is the
// DenseZeroPad width (0 for none): entries past it are not written, so not checked.
func (g *ScoredDataGroup) checkEncodable(k int) error {
	for j, f := range g.Scores {
		if !finite(f) {
			return fmt.Errorf("%w: scores[%d] = %v", ErrNonFinite, j, f)
		}
	}
	for _, m := range []struct {
		name string
		v    [][]float64
	}{{"advantages", g.Advantages}, {"ref_logprobs", g.RefLogprobs}, {"inference_logprobs", g.InferenceLogprobs}} {
		for i, row := range m.v {
			for j, f := range row {
				if !finite(f) {
					return fmt.Errorf("%w: %s[%d][%d] = %v", ErrNonFinite, m.name, i, j, f)
				}
			}
		}
	}
	for i, seq := range g.Messages {
		for j, msg := range seq {
			if len(msg) > 0 && !json.Valid(msg) {
				return invalidJSON(fmt.Sprintf("messages[%d][%d]", i, j), (&jsonWriter{}).raw(msg))
			}
		}
	}
	if len(g.Images) > 0 && !json.Valid(g.Images) {
		return invalidJSON("images", (&jsonWriter{}).raw(g.Images))
	}
	for _, v := range []struct {
		name  string
		v     any
		isNil bool
	}{
		{"generation_params", g.GenerationParams, g.GenerationParams == nil},
		{"overrides", g.Overrides, g.Overrides == nil},
		{"group_overrides", g.GroupOverrides, g.GroupOverrides == nil},
	} {
		if !v.isNil {
			if _, err := marshalValue(v.v, v.name); err != nil {
				return err
			}
		}
	}
	for i, r := range g.Distill {
		for pos := range r.Len() {
			_, lps := r.Row(pos)
			if k > 0 && len(lps) > k {
				lps = lps[:k]
			}
			for j, f := range lps {
				if !finite(float64(f)) {
					return nonFiniteDistill(i, pos, j, float64(f))
				}
			}
		}
	}
	return nil
}
