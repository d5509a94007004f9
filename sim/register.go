package sim

import (
	"fmt"
	"sync"

	"github.com/adaptsched/adaptsched/backends"
)

var registered sync.Once

// Register makes the simulator a backend of the registry, "sim" (opened
// as backends.Open("sim:<profile>"), with DefaultOptions). A program that
// offers simulated devices calls it; importing sim alone registers
// nothing, so that a program that links sim for its profiles or tables
// (or backends/all, which registers the real backends) does not offer
// devices that are not there. Calling it again does nothing.
func Register() {
	registered.Do(func() {
		backends.Register("sim", func(arg string) (backends.Backend, error) {
			if arg == "" {
				return nil, &backends.UnavailableError{Backend: "sim", Reason: fmt.Sprintf("no profile named: open sim:<profile>, one of %v", Profiles()), NeedsParam: true}
			}
			return Open(arg, DefaultOptions())
		})
	})
}
