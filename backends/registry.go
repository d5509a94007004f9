package backends

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Factory opens a backend. arg is what follows the first ':' in the name
// given to Open ("mi300x" for "sim:mi300x"), empty when there is none.
type Factory func(arg string) (Backend, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes a backend available under name, as database/sql does for
// drivers. Backends register in init; package backends/all imports them
// all. Register panics on a nil factory, an empty name, a name containing
// ':' or a duplicate name: these are programmer errors.
func Register(name string, f Factory) {
	if f == nil {
		panic("backends: Register factory is nil")
	}
	if name == "" || strings.Contains(name, ":") {
		panic(fmt.Sprintf("backends: Register name %q is empty or contains ':'", name))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic("backends: Register called twice for " + name)
	}
	factories[name] = f
}

// Drivers returns the registered names, sorted.
func Drivers() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open opens the backend called name: a registered name, optionally
// followed by ':' and an argument for its factory ("sim:h100"). An
// unknown name's error (ErrUnknownBackend) lists the registered ones, so
// that a user who mistyped one sees what there is (TestOpenUnknown).
func Open(name string) (Backend, error) {
	driver, arg, _ := strings.Cut(name, ":")
	mu.RLock()
	f, ok := factories[driver]
	mu.RUnlock()
	if !ok {
		known := strings.Join(Drivers(), ", ")
		if known == "" {
			known = "none"
		}
		return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownBackend, driver, known)
	}
	return f(arg)
}
