package backends_test

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
)

// A driver registers a factory in init; Open passes it what follows the
// first ':' of the name. This one is never available, as a GPU backend is
// on a machine without its libraries.
func ExampleRegister() {
	backends.Register("example-gpu", func(arg string) (backends.Backend, error) {
		return nil, &backends.UnavailableError{Backend: "example-gpu", Reason: "no device " + arg}
	})
	_, err := backends.Open("example-gpu:0")
	fmt.Println(errors.Is(err, backends.ErrUnavailable))
	fmt.Println(err)
	// Output:
	// true
	// backends: example-gpu unavailable: no device 0
}
