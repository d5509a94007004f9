//go:build !cgo

package rocm

import "github.com/adaptsched/adaptsched/backends"

// Device is the GPU backend; without cgo it cannot be opened.
type Device struct{}

// Open returns the unavailable error: the backend loads its libraries
// through cgo.
func Open(o Options) (*Device, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return nil, &backends.UnavailableError{Backend: "rocm", Reason: "built without cgo"}
}

func openBackend(o Options) (backends.Backend, error) {
	_, err := Open(o)
	return nil, err
}
