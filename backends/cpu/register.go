package cpu

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
)

func init() {
	backends.Register("cpu", factory("cpu", 0))
	backends.Register("cpu1", factory("cpu1", 1))
}

// factory opens a registered CPU backend with threads workers (0: every
// core). The argument "gonum" ("cpu:gonum") forces the pure-Go matmul.
func factory(name string, threads int) backends.Factory {
	return func(arg string) (backends.Backend, error) {
		opts := DefaultOptions().WithThreads(threads)
		switch arg {
		case "":
			return New(name, opts)
		case "gonum":
			return New(name+":gonum", opts.WithGonum(true))
		}
		return nil, fmt.Errorf("%w %q for %s (want \"\" or \"gonum\")", ErrUnknownArg, arg, name)
	}
}
