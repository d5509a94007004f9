//go:build !cgo

package cpu

// cgoEnabled reports whether this build can load a CBLAS at run time.
const cgoEnabled = false

// loadCBLAS cannot load a library without cgo: the backend runs on gonum.
func loadCBLAS() (blasPath, []string) {
	return blasPath{}, []string{"built without cgo (CGO_ENABLED=0): no CBLAS can be loaded"}
}
