package report

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"
)

// DefaultTopK is the number of teacher entries the page shows per position when
// Options.TopK is zero.
const DefaultTopK = 10

// DefaultConcurrency is the number of detokenize requests in flight when
// Options.Concurrency is zero.
const DefaultConcurrency = 8

// Detokenizer turns token ids into text; *vllm.Client implements it (vLLM's
// /detokenize). Implementations must be safe for concurrent use.
type Detokenizer interface {
	// Detokenize returns the text of ids.
	Detokenize(ctx context.Context, ids []int32) (string, error)
}

// Options configure a [Writer]. The zero value is usable.
type Options struct {
	// Title is the page's title ("agenticopd report" when "").
	Title string
	// TopK is the number of teacher entries kept per position for the hover (the
	// first TopK of each row, by teacher rank); [DefaultTopK] when zero. It bounds the
	// page's size: about 8 bytes per entry.
	TopK int
	// Detokenizer gives each token's text, one id per request, each id once per page.
	// Nil shows ids instead of text.
	Detokenizer Detokenizer
	// Concurrency bounds the detokenize requests in flight ([DefaultConcurrency] when
	// zero).
	Concurrency int
}

// ErrClosed is returned by Add and Close after Close.
var ErrClosed = errors.New("report: writer closed")

// Writer writes one page to an io.Writer, group by group: the groups' data are
// written as they are added, and the token texts, shared by all groups, when the
// Writer is closed. A Writer is not safe for concurrent use. The caller closes the
// underlying io.Writer after Close or CloseWithError.
//
// Until it is closed the page says at its top that it is incomplete, so that the page
// of a program that died (killed, out of memory) never looks complete; Close removes
// that notice, and CloseWithError replaces it with the failure.
type Writer struct {
	out    *bufio.Writer
	opts   Options
	vocab  map[int32]string
	groups int
	err    error // the first failure of Add or of the page's writes; ErrClosed once closed
	closed bool
}

// NewWriter writes the page's head to w and returns a Writer for its groups.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	if opts.Title == "" {
		opts.Title = "agenticopd report"
	}
	if opts.TopK <= 0 {
		opts.TopK = DefaultTopK
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	rw := &Writer{out: bufio.NewWriterSize(w, 1<<16), opts: opts, vocab: map[int32]string{}}
	if err := pageTmpl.ExecuteTemplate(rw.out, "head", struct {
		Title string
		CSS   template.CSS
	}{opts.Title, template.CSS(pageCSS)}); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return rw, nil
}

// Write writes a page of groups to w: NewWriter, Add for each group, Close.
func Write(ctx context.Context, w io.Writer, opts Options, groups ...Group) error {
	rw, err := NewWriter(w, opts)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := rw.Add(ctx, g); err != nil {
			return err
		}
	}
	return rw.Close()
}

// Add detokenizes the group's token ids the page does not know yet and writes the
// group. A per-token slice whose length differs from the sequence's tokens is an
// error, and so is a failed detokenize request; after an error the Writer only
// returns it.
func (w *Writer) Add(ctx context.Context, g Group) error {
	if w.err != nil {
		return w.err
	}
	seqs := make([]encodedSeq, len(g.Sequences))
	for i := range g.Sequences {
		s, err := encodeSeq(&g.Sequences[i], w.opts.TopK)
		if err != nil {
			w.err = fmt.Errorf("report: group %q: %s: %w", g.Title, g.Sequences[i].Label, err)
			return w.err
		}
		seqs[i] = s
	}
	if err := w.detokenize(ctx, seqs); err != nil {
		w.err = fmt.Errorf("report: group %q: %w", g.Title, err)
		return w.err
	}
	if err := w.writeGroup(g, seqs); err != nil {
		w.err = fmt.Errorf("report: %w", err)
		return w.err
	}
	w.groups++
	return nil
}

// Close writes the token texts and the page's script, and flushes. It does not close
// the underlying io.Writer. After a failed Add it returns that failure and writes
// nothing: close such a page with CloseWithError.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	return w.finish("")
}

// CloseWithError closes the page as the page of a run that failed with cause: at its
// top (at its end without the page's script) the page says "The run failed", gives
// cause's message and the number of groups it holds; the token texts of those
// groups and the script are written as by Close. It also closes a page whose Add
// failed (cause then says why; the groups added before stay). A nil cause is Close.
// It returns an error when the page could not be written, and [ErrClosed] after
// Close or CloseWithError.
func (w *Writer) CloseWithError(cause error) error {
	switch {
	case cause == nil:
		return w.Close()
	case w.closed:
		return ErrClosed
	}
	reason := cause.Error()
	if reason == "" {
		reason = "(an error without a message)"
	}
	return w.finish(reason)
}

// finish writes the page's tail; failed is the reason of a failed run, or "".
func (w *Writer) finish(failed string) error {
	w.closed = true
	vocab := make(map[string]string, len(w.vocab))
	for id, s := range w.vocab {
		vocab[strconv.Itoa(int(id))] = s
	}
	b, err := json.Marshal(vocab) // escapes <, > and &: safe inside a script element
	if err != nil {
		w.err = fmt.Errorf("report: %w", err)
		return w.err
	}
	err = pageTmpl.ExecuteTemplate(w.out, "tail", struct {
		Groups int
		Failed string
		Vocab  template.JS
		JS     template.JS
	}{w.groups, failed, template.JS(b), template.JS(pageJS)})
	if err == nil {
		err = w.out.Flush()
	}
	if err != nil {
		w.err = fmt.Errorf("report: %w", err)
		return w.err
	}
	w.err = ErrClosed
	return nil
}

// detokenize fills the vocabulary with the ids of seqs it lacks.
func (w *Writer) detokenize(ctx context.Context, seqs []encodedSeq) error {
	want := map[int32]bool{}
	for _, s := range seqs {
		for _, ids := range [][]int32{s.tokens, s.topIDs} {
			for _, id := range ids {
				if _, ok := w.vocab[id]; !ok {
					want[id] = true
				}
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	if w.opts.Detokenizer == nil {
		for id := range want {
			w.vocab[id] = "⟨" + strconv.Itoa(int(id)) + "⟩"
		}
		return nil
	}
	var mu sync.Mutex
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(w.opts.Concurrency)
	for _, id := range slices.Sorted(maps.Keys(want)) {
		eg.Go(func() error {
			text, err := w.opts.Detokenizer.Detokenize(ctx, []int32{id})
			if err != nil {
				return fmt.Errorf("detokenize %d: %w", id, err)
			}
			mu.Lock()
			w.vocab[id] = text
			mu.Unlock()
			return nil
		})
	}
	return eg.Wait()
}

// Flags of a position in the page's data ("flags"): the kind in the low three bits.
const (
	flagMasked  = 1 << 3
	flagScored  = 1 << 4
	flagOutside = 1 << 5 // scored, and the sampled token is not in the teacher's row
	noLogprob   = math.MaxUint16
	logprobUnit = 1000 // logprobs are stored as round(-lp*1000), to 0.001 nat
)

// encodedSeq is a sequence in the page's compact form, and its figures.
type encodedSeq struct {
	tokens  []int32
	flags   []uint8
	student []uint16
	teacher []uint16 // the teacher's logprob of the sampled token where known exactly
	bound   []uint16 // outside the top-K: the row's lowest logprob, an upper bound
	entries []uint16 // the row's entries (the data's K at the position)
	topN    []uint8
	topIDs  []int32
	topLPs  []uint16
	figures Figures

	generated       int
	hints           []Hint
	hintsUnknown    bool
	label           string
	score           float64
	breakdown, info []Term
}

// quantize stores a logprob as round(-lp*1000); noLogprob for NaN or a positive value.
func quantize(lp float64) uint16 {
	switch {
	case math.IsNaN(lp) || lp > 0:
		return noLogprob
	case -lp*logprobUnit >= noLogprob-1:
		return noLogprob - 1
	default:
		return uint16(math.Round(-lp * logprobUnit))
	}
}

func encodeSeq(s *Sequence, topK int) (encodedSeq, error) {
	figures, err := s.Figures()
	if err != nil {
		return encodedSeq{}, err
	}
	n := len(s.Tokens)
	e := encodedSeq{
		tokens: s.Tokens, flags: make([]uint8, n), student: make([]uint16, n), teacher: make([]uint16, n),
		bound: make([]uint16, n), entries: make([]uint16, n), topN: make([]uint8, n), figures: figures,
		label: s.Label, score: s.Score, breakdown: s.Breakdown, info: s.Info, hintsUnknown: s.HintsUnknown,
	}
	for _, h := range s.Hints {
		if h.Pos < 0 || h.Pos > n {
			return encodedSeq{}, fmt.Errorf("hint at position %d of %d", h.Pos, n)
		}
		e.hints = append(e.hints, h)
	}
	seenUnmasked := false
	for p := range n {
		masked := s.Masked != nil && s.Masked[p]
		kind := KindGenerated
		switch {
		case s.Kinds != nil:
			kind = s.Kinds[p]
		case masked && !seenUnmasked:
			kind = KindPrompt
		case masked:
			kind = KindTool
		}
		seenUnmasked = seenUnmasked || !masked
		f := uint8(kind & 7)
		if masked {
			f |= flagMasked
		}
		if kind == KindGenerated {
			e.generated++
		}
		t := s.teacherAt(p)
		if t.scored {
			f |= flagScored
			if t.outside {
				f |= flagOutside
			}
			ids, lps := s.Rows.Row(p)
			k := min(len(ids), topK, math.MaxUint8)
			e.topN[p] = uint8(k)
			e.entries[p] = uint16(min(len(ids), math.MaxUint16))
			e.topIDs = append(e.topIDs, ids[:k]...)
			for _, lp := range lps[:k] {
				e.topLPs = append(e.topLPs, quantize(float64(lp)))
			}
		}
		e.flags[p] = f
		e.student[p] = quantize(t.student)
		e.teacher[p] = quantize(t.logprob) // NaN (none) where not scored
		e.bound[p] = quantize(t.bound)
	}
	return e, nil
}

func b64[T any](v []T) string {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic("report: " + err.Error()) // fixed-size types only
	}
	return base64.StdEncoding.EncodeToString(b)
}

// seqData is one sequence in a group's data element; see the package doc.
type seqData struct {
	N       int    `json:"n"`
	Tokens  string `json:"tok"`
	Flags   string `json:"flags"`
	Student string `json:"slp"`
	Teacher string `json:"tlp"`
	Bound   string `json:"tbd"`
	Entries string `json:"kall"`
	TopN    string `json:"kn"`
	TopIDs  string `json:"kid"`
	TopLPs  string `json:"klp"`
	Hints   []Hint `json:"hints"`
}

// MarshalJSON writes a hint as {"pos":…,"text":…}.
func (h Hint) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Pos  int    `json:"pos"`
		Text string `json:"text"`
	}{h.Pos, h.Text})
}

func (w *Writer) writeGroup(g Group, seqs []encodedSeq) error {
	data := make([]seqData, len(seqs))
	for i, s := range seqs {
		data[i] = seqData{
			N: len(s.tokens), Tokens: b64(s.tokens), Flags: b64(s.flags), Student: b64(s.student),
			Teacher: b64(s.teacher), Bound: b64(s.bound), Entries: b64(s.entries), TopN: b64(s.topN), TopIDs: b64(s.topIDs), TopLPs: b64(s.topLPs),
			Hints: s.hints,
		}
		if data[i].Hints == nil {
			data[i].Hints = []Hint{}
		}
	}
	b, err := json.Marshal(struct {
		Seqs []seqData `json:"seqs"`
	}{data})
	if err != nil {
		return err
	}
	return pageTmpl.ExecuteTemplate(w.out, "group", groupView(w.groups, g, seqs, template.JS(b)))
}
