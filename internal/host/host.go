// Package host reads what the machine says of itself: its CPU model and
// /proc fields. Backends and commands share it so that each names the
// machine alike.
package host

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// CPUModel returns the "model name" of /proc/cpuinfo, or GOARCH where
// there is none (other systems, some ARM kernels).
func CPUModel() string {
	if v := Field("/proc/cpuinfo", "model name"); v != "" {
		return v
	}
	return runtime.GOARCH
}

// Field returns the value of the first "key : value" line of a /proc
// file, or "" when the file or the key is missing.
func Field(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
