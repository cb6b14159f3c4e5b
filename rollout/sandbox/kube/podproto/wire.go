package podproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Where the helper lives in a sandbox pod. The init container copies the helper to
// HelperPath (an emptyDir mounted at HelperDir in both containers), and the pod's
// main container runs HelperPath serve as its PID 1.
const (
	// HelperDir is the directory the helper's volume is mounted at.
	HelperDir = "/.agenticopd"
	// HelperPath is the helper binary inside the pod.
	HelperPath = HelperDir + "/agenticopd-pod"
	// HelperImagePath is where the helper's own image holds the binary; its
	// entrypoint is [HelperImagePath, OpInstall, HelperDir].
	HelperImagePath = "/agenticopd-pod"
)

// Ops: the second element of every exec's argv ([HelperPath, op, request JSON]).
const (
	OpServe   = "serve"   // PID 1 of the main container: reaps, forwards SIGTERM, exits when idle
	OpInstall = "install" // argv [binary, install, dir]: copy the binary into dir (the init container)
	OpRun     = "run"     // run a command (RunRequest)
	OpKill    = "kill"    // kill a running command by its id (KillRequest)
	OpRead    = "read"    // read a file (ReadRequest)
	OpWrite   = "write"   // write a file (WriteRequest; the bytes as stdin frames)
	OpStat    = "stat"    // stat a path (PathRequest)
	OpReadDir = "readdir" // list a directory (PathRequest)
	OpRestore = "restore" // give the workspace back to its owner (RestoreRequest)
	OpSearch  = "search"  // search_files inside the pod (SearchRequest)
)

// Frame kinds. The helper's stdout is a sequence of frames; every call that the
// helper completes ends with exactly one FrameResult. The client's stdin, where a
// call reads one, is a sequence of FrameStdin frames ended by FrameStdinEnd.
const (
	FrameStdout   byte = 'o' // helper → client: the command's standard output
	FrameStderr   byte = 'e' // helper → client: the command's standard error
	FrameData     byte = 'd' // helper → client: a file's bytes, or a JSON listing
	FrameResult   byte = 'r' // helper → client: the call's Result as JSON, always last
	FrameStdin    byte = 'i' // client → helper: bytes for the command's stdin or the written file
	FrameStdinEnd byte = 'c' // client → helper: end of stdin (empty payload)
)

// Frame sizes. A frame's header is its kind and its payload's length as a 4-byte
// big-endian integer.
const (
	// HeaderSize is the size of a frame header.
	HeaderSize = 5
	// MaxFrame is the largest payload a frame may carry; a reader refuses a
	// header that announces more, before it allocates.
	MaxFrame = 1 << 20
)

// ErrFrame is wrapped by the errors of a [FrameReader] that read something that is
// not a frame stream: an unknown kind, a length over [MaxFrame], a stream cut
// inside a frame.
var ErrFrame = errors.New("podproto: malformed frame")

// WriteFrame writes one frame of the given kind. A payload longer than [MaxFrame]
// is written as several frames of that kind.
func WriteFrame(w io.Writer, kind byte, payload []byte) error {
	var hdr [HeaderSize]byte
	hdr[0] = kind
	for first := true; first || len(payload) > 0; first = false {
		n := min(len(payload), MaxFrame)
		binary.BigEndian.PutUint32(hdr[1:], uint32(n))
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if n > 0 {
			if _, err := w.Write(payload[:n]); err != nil {
				return err
			}
		}
		payload = payload[n:]
	}
	return nil
}

// FrameReader reads frames. It holds one buffer of at most [MaxFrame] bytes, so a
// stream of any content costs bounded memory.
type FrameReader struct {
	r     io.Reader
	kinds string
	hdr   [HeaderSize]byte
	buf   []byte
}

// NewFrameReader returns a reader of frames from r that accepts only the given
// kinds (for example "oedr" on the client's side).
func NewFrameReader(r io.Reader, kinds string) *FrameReader {
	return &FrameReader{r: r, kinds: kinds}
}

// Next returns the next frame's kind and payload. The payload is valid until the
// next call. At a clean end of the stream (between frames) the error is io.EOF; a
// stream that ends inside a frame, an unknown kind or a length over [MaxFrame] is
// an error wrapping [ErrFrame].
func (fr *FrameReader) Next() (byte, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: the stream ends inside a frame header", ErrFrame)
		}
		return 0, nil, err
	}
	kind := fr.hdr[0]
	if !validKind(fr.kinds, kind) {
		return 0, nil, fmt.Errorf("%w: unknown kind %q", ErrFrame, kind)
	}
	n := binary.BigEndian.Uint32(fr.hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: a frame of %d bytes, over the %d allowed", ErrFrame, n, MaxFrame)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n, max(int(n), 2*cap(fr.buf)))
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: the stream ends inside a frame of %d bytes", ErrFrame, n)
		}
		return 0, nil, err
	}
	return kind, fr.buf, nil
}

func validKind(kinds string, k byte) bool {
	for i := range len(kinds) {
		if kinds[i] == k {
			return true
		}
	}
	return false
}

// Client-side and helper-side sets of kinds.
const (
	// HelperKinds are the kinds the helper writes.
	HelperKinds = string(FrameStdout) + string(FrameStderr) + string(FrameData) + string(FrameResult)
	// StdinKinds are the kinds the client writes.
	StdinKinds = string(FrameStdin) + string(FrameStdinEnd)
)
