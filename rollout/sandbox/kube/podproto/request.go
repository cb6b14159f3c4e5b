package podproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// The requests, one JSON object as the third element of the exec's argv. Every
// path is slash-separated and relative to Root, the workspace's absolute path in
// the pod; the helper resolves it beneath Root (through an [os.Root], as the host
// side does) and refuses what leaves it.

// RunRequest is the request of [OpRun].
type RunRequest struct {
	// ID names the run for [OpKill]; the client makes it random.
	ID string `json:"id"`
	// Argv is executed directly (a shell command is ["/bin/sh", "-c", text]).
	Argv []string `json:"argv"`
	// Root is the workspace; Dir the working directory relative to it ("" = Root).
	Root string `json:"root"`
	Dir  string `json:"dir,omitempty"`
	// Env, when not nil, is the command's whole environment; nil means the
	// helper's own (the image's, as the runtime set it for the exec).
	Env []string `json:"env,omitempty"`
	// Timeout bounds the command's wall time; the tree is killed at it.
	Timeout time.Duration `json:"timeout"`
	// OutputLimit is the bytes of each of stdout and stderr kept (head and tail);
	// KillOutputLimit the total output past which the command is killed.
	OutputLimit     int   `json:"output_limit"`
	KillOutputLimit int64 `json:"kill_output_limit"`
	// Stream sends stdout as FrameStdout frames as it is written ([rollout.Starter]);
	// otherwise both streams are captured and sent before the result.
	Stream bool `json:"stream,omitempty"`
	// Stdin says the client sends FrameStdin frames ended by FrameStdinEnd; the
	// command's stdin is empty otherwise. A framed stdin that ends without
	// FrameStdinEnd means the client is gone: the command is killed.
	Stdin bool `json:"stdin,omitempty"`
}

// KillRequest is the request of [OpKill].
type KillRequest struct {
	// ID is the run to kill; "" kills every run of the pod.
	ID string `json:"id"`
}

// PathRequest is the request of [OpStat] and [OpReadDir].
type PathRequest struct {
	Root string `json:"root"`
	Path string `json:"path"`
	// Max bounds the entries [OpReadDir] returns; over it the call fails with
	// [KindTooLarge].
	Max int `json:"max,omitempty"`
}

// ReadRequest is the request of [OpRead]: bytes [Offset, Offset+Limit) of a
// regular file, as FrameData frames, and the file's [FileInfo] in the result.
type ReadRequest struct {
	Root   string `json:"root"`
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit"`
	// Max, when positive, refuses ([KindTooLarge]) a file larger than Max.
	Max int64 `json:"max,omitempty"`
	// AllowDir answers a directory with its FileInfo instead of refusing it.
	AllowDir bool `json:"allow_dir,omitempty"`
}

// WriteRequest is the request of [OpWrite]: the file's new content comes as
// FrameStdin frames ended by FrameStdinEnd; parent directories are created.
type WriteRequest struct {
	Root string `json:"root"`
	Path string `json:"path"`
	// Max bounds the bytes written; more is refused with [KindTooLarge].
	Max int64 `json:"max"`
}

// RestoreRequest is the request of [OpRestore].
type RestoreRequest struct {
	Root string `json:"root"`
	// Budget bounds the walk; past it the call fails with [KindBudget].
	Budget time.Duration `json:"budget"`
	// MaxEntries bounds the entries visited; the rest is left as it is.
	MaxEntries int `json:"max_entries"`
}

// SearchRequest is the request of [OpSearch]: the search_files query and the
// budget the host's meter allows for it. The result's FrameData is a JSON
// [rollout.SearchResult].
type SearchRequest struct {
	Root  string              `json:"root"`
	Query rollout.SearchQuery `json:"query"`
}

// FileInfo is a file's description, as [OpStat] and [OpRead] give it.
type FileInfo struct {
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime int64       `json:"mtime_ns"`
}

// Result is the payload of the FrameResult that ends every completed call.
type Result struct {
	// Error, when set, says why the call failed; the other fields are then
	// zero except where noted.
	Error *Error `json:"error,omitempty"`

	// For OpRun: what the command did, as [rollout.CommandResult] says it.
	ExitCode        int   `json:"exit_code"`
	TimedOut        bool  `json:"timed_out,omitempty"`
	OutputTruncated bool  `json:"output_truncated,omitempty"`
	OutputKilled    bool  `json:"output_killed,omitempty"`
	Killed          bool  `json:"killed,omitempty"`      // by OpKill
	ClientLost      bool  `json:"client_lost,omitempty"` // stdin ended without FrameStdinEnd
	StdoutBytes     int64 `json:"stdout_bytes,omitempty"`
	StderrBytes     int64 `json:"stderr_bytes,omitempty"`
	// Duration is the command's wall time in the pod.
	Duration time.Duration `json:"duration,omitempty"`

	// For OpRead and OpStat: the file.
	Info *FileInfo `json:"info,omitempty"`
	// For OpKill: how many runs were signalled.
	Signalled int `json:"signalled,omitempty"`
}

// Kinds of [Error]; the client maps them to the errors of io/fs, to
// [rollout.ErrRestoreBudget] and to this package's sentinels.
const (
	KindNotExist   = "not-exist"   // fs.ErrNotExist
	KindExist      = "exist"       // fs.ErrExist
	KindPermission = "permission"  // fs.ErrPermission
	KindInvalid    = "invalid"     // fs.ErrInvalid: a path that leaves the workspace, a bad request
	KindTooLarge   = "too-large"   // ErrTooLarge
	KindNotRegular = "not-regular" // ErrNotRegular: a FIFO, socket, device, or a directory read as a file
	KindNotDir     = "not-dir"     // ErrNotDir
	KindHardLinked = "hard-linked" // ErrHardLinked
	KindBudget     = "budget"      // rollout.ErrRestoreBudget
	KindStart      = "start"       // ErrStart: the command could not be started
	KindInternal   = "internal"    // anything else the helper could not do
)

// Sentinel errors, reached with errors.Is through an [*Error].
var (
	// ErrNoResult is wrapped by the error of a call whose exec ended without a
	// result frame: the pod is gone, its container was killed (OOM) or the stream
	// broke. It is never a command's failure, which a result reports.
	ErrNoResult = errors.New("podproto: the helper gave no result (pod gone, container killed or stream broken)")
	// ErrTooLarge: a file or listing over the call's cap.
	ErrTooLarge = errors.New("podproto: too large")
	// ErrNotRegular: not a regular file (a FIFO, socket or device), or a
	// directory given to ReadFile.
	ErrNotRegular = errors.New("podproto: not a regular file")
	// ErrNotDir: a listing of something that is not a directory.
	ErrNotDir = errors.New("podproto: not a directory")
	// ErrHardLinked: WriteFile of a file with other hard links.
	ErrHardLinked = errors.New("podproto: file has other hard links")
	// ErrStart: the command could not be started (no such program, a working
	// directory that is not one).
	ErrStart = errors.New("podproto: could not start the command")
)

// Error is a failure the helper reports in its result. Reach the condition with
// errors.Is (fs.ErrNotExist, fs.ErrPermission, [ErrTooLarge], ...).
type Error struct {
	Kind    string `json:"kind"`
	Op      string `json:"op,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("podproto: %s %s: %s", e.Op, e.Path, e.Message)
	}
	return fmt.Sprintf("podproto: %s: %s", e.Op, e.Message)
}

// Is maps the kind to its sentinel.
func (e *Error) Is(target error) bool {
	switch e.Kind {
	case KindNotExist:
		return target == fs.ErrNotExist
	case KindExist:
		return target == fs.ErrExist
	case KindPermission:
		return target == fs.ErrPermission
	case KindInvalid:
		return target == fs.ErrInvalid
	case KindTooLarge:
		return target == ErrTooLarge
	case KindNotRegular:
		return target == ErrNotRegular
	case KindNotDir:
		return target == ErrNotDir
	case KindHardLinked:
		return target == ErrHardLinked
	case KindBudget:
		return target == rollout.ErrRestoreBudget
	case KindStart:
		return target == ErrStart
	}
	return false
}

// Marshal encodes a request as the argv element the helper reads.
func Marshal(req any) (string, error) {
	b, err := json.Marshal(req)
	return string(b), err
}
