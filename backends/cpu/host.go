package cpu

import "github.com/adaptsched/adaptsched/internal/host"

// maxAlloc bounds one allocation at the machine's physical memory
// (host.MemTotal).
var maxAlloc = host.MemTotal
