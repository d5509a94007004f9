package kernels

import "unsafe"

// AsF32 views b as float32 values without copying (host byte order). b must
// be 4-byte aligned, as every buffer of this module is; trailing bytes that
// do not fill a float32 are not part of the view.
func AsF32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// AsBytes views f as bytes without copying.
func AsBytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), len(f)*4)
}

// sameMemory reports whether a and b start at the same address: an
// in-place op's input and output.
func sameMemory(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}
