package adaptive

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time the calling OS thread has run, in ns,
// and true; time it waited for a core, as on a machine shared with
// other work, is not counted (CLOCK_THREAD_CPUTIME_ID). The caller
// holds its thread (runtime.LockOSThread).
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}

// processCPU returns the CPU time every thread of the process has run,
// in ns, and true (CLOCK_PROCESS_CPUTIME_ID): a parallel benchmark's
// goroutines together, without the time they waited for a core.
func processCPU() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}
