//go:build !cgo

package peer

import "fmt"

// Load fails: without cgo neither implementation can run.
func Load() error { return fmt.Errorf("%w: built without cgo", ErrNoBLAS) }

func execKernel(Impl, bool, int64, Shape, []float32, []float32, []float32) int64 {
	panic("peer: exec without cgo")
}
