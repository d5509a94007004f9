package cpu

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// cpuModel returns the "model name" of /proc/cpuinfo, or GOARCH where
// there is none (other systems, some ARM kernels).
func cpuModel() string {
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		return v
	}
	return runtime.GOARCH
}

// maxAlloc bounds one allocation at the machine's physical memory: a
// larger make() would kill the process (the runtime's out-of-memory is
// fatal, not a panic), where the caller should get ErrOutOfMemory.
var maxAlloc = sync.OnceValue(func() int64 {
	// MemTotal is in kB.
	if f := strings.Fields(procField("/proc/meminfo", "MemTotal")); len(f) > 0 {
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
			return kb * 1024
		}
	}
	return 1 << 40 // unknown: 1 TiB, still far below what makes make() panic
})

// procField returns the value of the first "key : value" line of a /proc
// file, or "" when the file or the key is missing.
func procField(path, key string) string {
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
