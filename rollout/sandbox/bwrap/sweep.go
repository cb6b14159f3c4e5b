package bwrap

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// markerKey is the environment variable that tags every process of an unconfined
// command with a per-command token.
const markerKey = "AGENTICOPD_SANDBOX_RUN"

// sweep kills every process whose initial environment carries marker. In unconfined
// mode this finds the children that left the process group with setsid. It is best
// effort: a process that exec'd with a cleared environment is not found. It repeats
// until a pass finds nothing, to catch processes forked during the previous pass.
func sweep(marker string) {
	needle := []byte(marker + "\x00")
	self := os.Getpid()
	for range 50 {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		found := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !hasEntry(env, needle) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			found++
		}
		if found == 0 {
			return
		}
		time.Sleep(time.Millisecond) // let the killed ones die
	}
}

// hasEntry reports whether the NUL-separated environment block env holds the entry
// needle (which ends in NUL).
func hasEntry(env, needle []byte) bool {
	return bytes.HasPrefix(env, needle) || bytes.Contains(env, append([]byte{0}, needle...))
}
