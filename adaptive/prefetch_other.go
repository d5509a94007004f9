//go:build !amd64

package adaptive

import "unsafe"

// prefetch is a no-op where no assembly is written for it.
func prefetch(p unsafe.Pointer, n uintptr) {}
