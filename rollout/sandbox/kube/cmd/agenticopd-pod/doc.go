// Command agenticopd-pod is the helper that runs inside every Kubernetes sandbox
// pod: the pod-side twin of the bubblewrap sandbox's runner and host-side file
// tools. It speaks the protocol of package podproto (requests in the argv, frames on
// stdout, one result frame per call) and must build as a static binary
// (CGO_ENABLED=0), so it runs in any task image; it depends on the standard library,
// golang.org/x/sys and, for its image subcommand only, go-containerregistry (pure
// Go, so the binary stays static).
//
// Usage:
//
//	agenticopd-pod serve [-idle 10m]     PID 1 of the pod's main container
//	agenticopd-pod install DIR           copy this binary into DIR (the init container)
//	agenticopd-pod image -o F.tar -tag N write this binary's one-layer image as a docker archive
//	agenticopd-pod OP REQUEST-JSON       one call: run, kill, read, write, stat, readdir, restore, search
//
// Design decisions:
//
//   - run makes the helper a child subreaper (PR_SET_CHILD_SUBREAPER) and starts the
//     command in its own process group; everything the command starts, setsid or
//     not, stays a descendant of the helper. At the timeout, on kill (OpKill sends
//     SIGUSR1 to the run's helper, found by its id under the state directory), on
//     the output hard cap, when the client's framed stdin ends without its end frame,
//     and always once the command has exited, the helper walks /proc for its
//     descendants and SIGKILLs them until none is left, then reaps them: no process
//     outlives its command, as in the bubblewrap sandbox.
//   - Output is capped per stream as the bubblewrap sandbox caps it (head and tail,
//     the cut marked), in the pod, so at most twice the cap crosses the API server.
//   - The file ops go through os.Root on the workspace, the mechanism of the
//     host-side file tools, so refusals (symlinks out of the workspace, "..",
//     FIFOs, sockets, devices, hard-linked files on write) are the same by
//     construction.
//   - restore walks by directory descriptors, two at most, going up by ".." checked
//     against the device and inode it came from: linear at any depth, bounded by a
//     time budget reported as its own error kind.
//   - search runs internal/filesearch, the code of the host's search_files.
//   - serve exits after an idle time without a call (every call touches the activity
//     file in the state directory; a running command touches it every 5 s), so a
//     pod whose env process died ends itself; it also reaps zombies, kills orphans
//     reparented to it and passes SIGTERM on to every process of the container.
//
// The state directory is $AGENTICOPD_POD_STATE, else agenticopd-pod under the
// temporary directory; serve's idle time is -idle, else $AGENTICOPD_POD_IDLE.
package main
