package executor_test

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

// processCPU returns the CPU time all the process's threads have run, in
// ns, and true (CLOCK_PROCESS_CPUTIME_ID): like threadCPU, blind to time
// spent waiting for a core, and it counts the Executor's goroutines that
// wait for and observe queued work, and the garbage collector.
func processCPU() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}
