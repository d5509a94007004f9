//go:build cgo

package rocm_test

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
)

// Open answers unavailable, with the reason, where no GPU library or
// device is present; the caller then schedules onto the other backends.
func ExampleOpen() {
	d, err := rocm.Open(rocm.DefaultOptions().WithLibDirs("/nonexistent"))
	if errors.Is(err, backends.ErrUnavailable) {
		fmt.Println("rocm unavailable")
		return
	}
	defer d.Close()
	fmt.Println(d.Info().Platform)
	// Output: rocm unavailable
}

func ExampleParseArg() {
	o, err := rocm.ParseArg("nvidia:1")
	fmt.Println(o.Platform, o.Device, err)
	// Output: nvidia 1 <nil>
}
