// Package host reads what the machine says of itself: its CPU model and
// /proc fields. Backends and commands share it so that each names the
// machine alike.
package host

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
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

// MemTotal returns the machine's physical memory in bytes (/proc/meminfo),
// 1 TiB where it is not known. It bounds one host allocation: a larger
// make() kills the process (the runtime's out-of-memory is fatal, not a
// panic), where the caller should get backends.ErrOutOfMemory.
var MemTotal = sync.OnceValue(func() int64 {
	// MemTotal is in kB.
	if f := strings.Fields(Field("/proc/meminfo", "MemTotal")); len(f) > 0 {
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
			return kb * 1024
		}
	}
	return 1 << 40 // unknown: 1 TiB, still far below what makes make() panic
})
