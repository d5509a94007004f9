//go:build !linux

package adaptive

// threadCPU reports no thread CPU clock outside Linux.
func threadCPU() (int64, bool) { return 0, false }

// processCPU reports no process CPU clock outside Linux.
func processCPU() (int64, bool) { return 0, false }
