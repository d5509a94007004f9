//go:build cgo

package peer

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -ldl
#include "peerkern.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// Load dlopens OpenBLAS (libopenblas.so.0) once per process and makes it
// single-threaded. Everything that runs the BLAS implementation calls it
// first; it returns an error wrapping ErrNoBLAS when the library is
// missing.
func Load() error {
	loadOnce.Do(func() {
		var buf [512]C.char
		if C.peer_load_blas(&buf[0], C.int(len(buf))) != 0 {
			loadErr = fmt.Errorf("%w: %s", ErrNoBLAS, C.GoString(&buf[0]))
		}
	})
	return loadErr
}

// execKernel runs impl (or the empty probe, when empty) on c = a·b through
// peerkern.c's peer_exec, then busy-waits extra ns (the drift), and
// returns the ns it took. Load must have succeeded.
func execKernel(impl Impl, empty bool, extra int64, sh Shape, a, b, c []float32) int64 {
	if empty {
		return int64(C.peer_exec(C.PEER_EMPTY, 0, 0, 0, 0, nil, nil, nil))
	}
	return int64(C.peer_exec(C.int(impl), C.int64_t(extra), C.int(sh.M), C.int(sh.N), C.int(sh.K),
		(*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0])), (*C.float)(unsafe.Pointer(&c[0]))))
}
