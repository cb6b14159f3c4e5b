package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultIdle is how long serve waits without a call before it exits (and the
// pod's container with it).
const DefaultIdle = 10 * time.Minute

// serve is the main container's PID 1: it reaps the zombies every orphan leaves,
// kills orphans reparented to it (what is left of a run whose helper died), passes
// SIGTERM on to every process of the container, and exits when no call has marked
// activity for the idle time, so a pod whose env process is gone ends itself.
func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	idle := DefaultIdle
	if v := os.Getenv(envIdle); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "agenticopd-pod serve: %s=%q is not a positive duration\n", envIdle, v)
			return 2
		}
		idle = d
	}
	fs.DurationVar(&idle, "idle", idle, "exit after this long without a call (env "+envIdle+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if idle <= 0 {
		fmt.Fprintln(stderr, "agenticopd-pod serve: -idle must be positive")
		return 2
	}
	// Not PID 1 (a test, a runtime with its own init): orphans of the container
	// still come here.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	touchActivity()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	tick := time.NewTicker(min(max(idle/4, 10*time.Millisecond), 10*time.Second))
	defer tick.Stop()
	activity := filepath.Join(stateDir(), "activity")
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGCHLD {
				reapOrphans()
				continue
			}
			// Everything else in the container gets the signal; then PID 1 goes,
			// which ends the container.
			_ = unix.Kill(-1, unix.SIGTERM)
			return 0
		case <-tick.C:
			reapOrphans()
			fi, err := os.Stat(activity)
			if errors.Is(err, os.ErrNotExist) {
				touchActivity() // the agent removed it: start counting again
				continue
			}
			if err == nil && time.Since(fi.ModTime()) > idle {
				fmt.Fprintf(stderr, "agenticopd-pod serve: no call for %s; exiting\n", idle)
				return 0
			}
		}
	}
}

// reapOrphans kills this process's children (serve starts none: each is an orphan
// of a dead run helper, or its command) and reaps every zombie.
func reapOrphans() {
	self := os.Getpid()
	for _, pid := range descendants(self) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
