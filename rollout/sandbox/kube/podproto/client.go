package podproto

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Defaults used when a [Config] field is left at its zero value. The command limits
// are those of the bubblewrap sandbox.
const (
	DefaultRoot            = "/workspace"
	DefaultTimeout         = 30 * time.Second
	DefaultMaxTimeout      = 10 * time.Minute
	DefaultOutputLimit     = 64 << 10
	DefaultKillOutputLimit = 16 << 20
	DefaultFileTimeout     = 30 * time.Second
	DefaultMaxReadFile     = 256 << 20
	DefaultKillTimeout     = 10 * time.Second
	// RestoreTimeout bounds one Restore's walk in the pod, as
	// bwrap.RestoreTimeout does on the host.
	RestoreTimeout = 30 * time.Second
	// MaxWorkspaceEntries bounds the entries Restore visits and a listing holds.
	MaxWorkspaceEntries = 100000
)

// Config configures a [Client]. The zero value of every field is a documented
// default.
type Config struct {
	// Root is the workspace's absolute path in the pod. Default [DefaultRoot].
	Root string
	// Env, when not nil, is every command's environment; nil keeps the
	// container's (the image's, as the runtime sets it for an exec).
	Env []string
	// Timeout is a command's timeout when it gives none; MaxTimeout bounds the
	// one it gives. Defaults [DefaultTimeout], [DefaultMaxTimeout].
	Timeout, MaxTimeout time.Duration
	// OutputLimit is the bytes of each of stdout and stderr a Run keeps (its first
	// OutputLimit-OutputLimit/2 and last OutputLimit/2); KillOutputLimit the total
	// output past which the command is killed. Defaults [DefaultOutputLimit],
	// [DefaultKillOutputLimit].
	OutputLimit     int
	KillOutputLimit int64
	// FileTimeout bounds each file call that takes no context (the fs.FS of
	// [Client.FS]). Default [DefaultFileTimeout].
	FileTimeout time.Duration
	// MaxReadFile is the largest file ReadFile reads and WriteFile writes; a
	// larger one is refused with [ErrTooLarge]. Default [DefaultMaxReadFile].
	MaxReadFile int64
	// KillTimeout bounds the exec that kills a command. Default [DefaultKillTimeout].
	KillTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.KillOutputLimit <= 0 {
		c.KillOutputLimit = DefaultKillOutputLimit
	}
	if c.FileTimeout <= 0 {
		c.FileTimeout = DefaultFileTimeout
	}
	if c.MaxReadFile <= 0 {
		c.MaxReadFile = DefaultMaxReadFile
	}
	if c.KillTimeout <= 0 {
		c.KillTimeout = DefaultKillTimeout
	}
	return c
}

// Client speaks the protocol over an [Execer]: one exec per call. It is safe for
// concurrent use; it holds no state of the pod, so it has nothing to close.
type Client struct {
	e   Execer
	cfg Config
}

// NewClient returns a client of the helper in the pod e reaches. It does no I/O.
func NewClient(e Execer, cfg Config) (*Client, error) {
	if e == nil {
		return nil, errors.New("podproto: NewClient: nil Execer")
	}
	cfg = cfg.withDefaults()
	if cfg.Root[0] != '/' {
		return nil, fmt.Errorf("podproto: NewClient: Root %q is not an absolute path", cfg.Root)
	}
	if int64(cfg.OutputLimit) > cfg.KillOutputLimit {
		return nil, errors.New("podproto: NewClient: OutputLimit must not exceed KillOutputLimit")
	}
	return &Client{e: e, cfg: cfg}, nil
}

// Config returns the client's configuration with its defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// frameSink is the client's frame decoder: an io.Writer the Execer copies the
// helper's stdout into, which hands each complete frame to handle. It holds at most
// one frame's payload ([MaxFrame]).
type frameSink struct {
	kinds  string
	hdr    [HeaderSize]byte
	nh     int
	need   int
	buf    []byte
	handle func(kind byte, payload []byte) error
	result *Result
	err    error
}

func (s *frameSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.nh < HeaderSize {
			k := copy(s.hdr[s.nh:], p)
			s.nh += k
			p = p[k:]
			if s.nh < HeaderSize {
				break
			}
			if s.result != nil {
				s.err = fmt.Errorf("%w: a frame after the result", ErrFrame)
				continue
			}
			if !validKind(s.kinds, s.hdr[0]) {
				s.err = fmt.Errorf("%w: unknown kind %q", ErrFrame, s.hdr[0])
				continue
			}
			size := binary.BigEndian.Uint32(s.hdr[1:])
			if size > MaxFrame {
				s.err = fmt.Errorf("%w: a frame of %d bytes, over the %d allowed", ErrFrame, size, MaxFrame)
				continue
			}
			s.need, s.buf = int(size), s.buf[:0]
		} else {
			k := min(s.need-len(s.buf), len(p))
			s.buf = append(s.buf, p[:k]...)
			p = p[k:]
		}
		if len(s.buf) == s.need {
			s.err = s.deliver()
			s.nh = 0
		}
	}
	if s.err != nil {
		return n - len(p), s.err
	}
	return n, nil
}

func (s *frameSink) deliver() error {
	kind := s.hdr[0]
	if kind == FrameResult {
		var r Result
		if err := json.Unmarshal(s.buf, &r); err != nil {
			return fmt.Errorf("%w: result: %v", ErrFrame, err)
		}
		s.result = &r
		return nil
	}
	if s.handle == nil {
		return fmt.Errorf("%w: an unexpected frame of kind %q", ErrFrame, kind)
	}
	return s.handle(kind, s.buf)
}

// finish is the call's outcome once the exec has returned with execErr.
func (s *frameSink) finish(ctx context.Context, op string, execErr error) (Result, error) {
	if s.result != nil && s.err == nil {
		if s.result.Error != nil {
			if s.result.Error.Op == "" {
				s.result.Error.Op = op
			}
			return *s.result, s.result.Error
		}
		return *s.result, nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("podproto: %s: %w", op, err)
	}
	switch {
	case s.err != nil:
		return Result{}, fmt.Errorf("podproto: %s: %w (%w)", op, ErrNoResult, s.err)
	case s.nh != 0:
		return Result{}, fmt.Errorf("podproto: %s: %w (%w: the stream ends inside a frame; exec: %v)", op, ErrNoResult, ErrFrame, execErr)
	case execErr != nil:
		return Result{}, fmt.Errorf("podproto: %s: %w (exec: %w)", op, ErrNoResult, execErr)
	}
	return Result{}, fmt.Errorf("podproto: %s: %w", op, ErrNoResult)
}

// call runs one exec of op with req and returns its result. handle receives the
// frames before the result (nil refuses any); stdin, when not nil, is the exec's
// stdin, which must return io.EOF once done is closed.
func (c *Client) call(ctx context.Context, op string, req any, stdin io.Reader, handle func(byte, []byte) error) (Result, error) {
	arg, err := Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("podproto: %s: %w", op, err)
	}
	sink := &frameSink{kinds: HelperKinds, handle: handle}
	var diag limitedBuffer
	execErr := c.e.Exec(ctx, []string{HelperPath, op, arg}, stdin, sink, &diag)
	if execErr != nil && diag.Len() > 0 {
		execErr = fmt.Errorf("%w; helper said: %s", execErr, diag.String())
	}
	return sink.finish(ctx, op, execErr)
}

// limitedBuffer keeps the first 4 KiB written to it (the helper's diagnostics).
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p[:min(len(p), 4096-len(b.buf))]...)
	return len(p), nil
}

func (b *limitedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// heldStdin is an exec's stdin: the frames in data, then nothing until release,
// then io.EOF. Holding it open tells the helper the client is still there (a framed
// stdin that ends without FrameStdinEnd means it is gone).
type heldStdin struct {
	data    []byte
	release chan struct{}
}

func newHeldStdin(frames []byte) *heldStdin {
	return &heldStdin{data: frames, release: make(chan struct{})}
}

func (h *heldStdin) Read(p []byte) (int, error) {
	if len(h.data) > 0 {
		n := copy(p, h.data)
		h.data = h.data[n:]
		return n, nil
	}
	<-h.release
	return 0, io.EOF
}

// stdinFrames encodes data as FrameStdin frames and the FrameStdinEnd.
func stdinFrames(data []byte) []byte {
	var b frameBuffer
	if len(data) > 0 {
		_ = WriteFrame(&b, FrameStdin, data)
	}
	_ = WriteFrame(&b, FrameStdinEnd, nil)
	return b.b
}

type frameBuffer struct{ b []byte }

func (f *frameBuffer) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }
