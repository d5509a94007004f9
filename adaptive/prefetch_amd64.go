package adaptive

import "unsafe"

// prefetch asks the CPU to bring the cache lines of [p, p+n) into cache
// for writing (PREFETCHW every 64 bytes from p's line: a line another
// core wrote last comes over exclusive, in one trip rather than a read
// and then an upgrade), without waiting for them; n > 0. It is a
// hint: no memory is read as far as the program (or the race detector)
// can tell, so it may touch lines that other goroutines write under
// their locks. Go has no prefetch intrinsic outside the runtime.
//
//go:noescape
func prefetch(p unsafe.Pointer, n uintptr)
