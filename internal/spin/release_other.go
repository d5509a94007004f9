//go:build !amd64 || race

package spin

import "sync/atomic"

// release stores 0 in *p atomically: a release store (on arm64 one
// STLR, on amd64 under the race detector an XCHG the detector sees).
func release(p *uint32) { atomic.StoreUint32(p, 0) }
