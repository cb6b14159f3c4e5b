package podproto

import (
	"context"
	"io"
)

// Execer runs a program in the sandbox pod's main container: what the backend
// provides (client-go's remotecommand through the API server). Exec runs argv with
// the given streams and returns when the program has ended and its output has been
// copied, or when ctx ends (then the exec stream is closed; the program itself may
// go on running, which is why the helper enforces every limit in the pod). stdin
// may be nil (no stdin stream); stderr receives the helper's diagnostics only.
//
// The error is for the exec itself (the pod or the stream); a non-zero exit status
// of the program may be reported as an error too: the client does not rely on
// either, only on the result frame in stdout.
//
// Implementations must be safe for concurrent use.
type Execer interface {
	Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// ExecFunc adapts a function to an [Execer].
type ExecFunc func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error

// Exec calls f.
func (f ExecFunc) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return f(ctx, argv, stdin, stdout, stderr)
}
