package cpu

import (
	"strconv"
	"strings"
	"sync"

	"github.com/adaptsched/adaptsched/internal/host"
)

// maxAlloc bounds one allocation at the machine's physical memory: a
// larger make() would kill the process (the runtime's out-of-memory is
// fatal, not a panic), where the caller should get ErrOutOfMemory.
var maxAlloc = sync.OnceValue(func() int64 {
	// MemTotal is in kB.
	if f := strings.Fields(host.Field("/proc/meminfo", "MemTotal")); len(f) > 0 {
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
			return kb * 1024
		}
	}
	return 1 << 40 // unknown: 1 TiB, still far below what makes make() panic
})
