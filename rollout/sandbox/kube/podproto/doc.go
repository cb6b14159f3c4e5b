// Package podproto is the protocol between the library and agenticopd-pod, the
// static helper that runs inside every Kubernetes sandbox pod, and the client side of
// it.
//
// # Why a helper
//
// A pod is reached only by exec through the API server, and exec does not kill: a
// closed stream leaves the command running. So everything the bubblewrap sandbox
// enforces on the host (a timeout that kills the whole process tree, output caps,
// kill on cancel, file tools that refuse symlinks out of the workspace, Restore)
// happens inside the pod, in the helper, and the client only asks and reads.
//
// # The calls
//
// Every call is one exec of the argv [HelperPath, op, request JSON] ([OpRun],
// [OpKill], [OpRead], [OpWrite], [OpStat], [OpReadDir], [OpRestore], [OpSearch]; the
// requests are [RunRequest], [KillRequest], ...). The request travels in the argv, so
// no call depends on stdin closing (WebSocket v4 exec cannot send end of file). Calls
// that take bytes (a command's stdin, a written file) read them from stdin as
// frames ended by an explicit [FrameStdinEnd].
//
// The helper's stdout is a stream of frames: one kind byte, a 4-byte big-endian
// length, the payload ([MaxFrame] at most): [FrameStdout] and [FrameStderr] for a
// command's output, [FrameData] for file bytes and JSON listings, and one
// [FrameResult] that ends every call the helper completed, holding a [Result]: the
// command's exit code, timed-out and truncation flags, or a typed [Error] (not
// exist, permission, too large, invalid path, restore budget). Its stderr carries only
// diagnostics.
//
// An exec that ends without a result frame is never a command's result: the pod is
// gone, its container was OOM-killed mid-call, or the stream broke. The client
// reports it as an error wrapping [ErrNoResult] (with the [Execer]'s error), so a
// caller tells "the sandbox is gone" from "the command failed" (a result with a
// non-zero exit code).
//
// # Kill
//
// A run has an id (random, made by the client). [Process.Kill] and a cancelled
// context send a second exec, [OpKill] with that id: the helper of the run is
// signalled and kills its tree. A run whose framed stdin ends without
// [FrameStdinEnd] (the client's stream is gone) is killed as well, and the helper's
// own timeout holds in every case.
//
// # What the backend provides
//
// An [Execer]: run an argv in the pod's main container with stdin, stdout and
// stderr streams (client-go's remotecommand in package kube; a local subprocess in
// this package's tests). [Client] does the rest, in terms of the rollout types: Run,
// Start, ReadFile, WriteFile, FS, Restore and SearchFiles ([rollout.Searcher]).
package podproto
