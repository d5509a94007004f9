// Package all registers every backend of this module with the backends
// registry: import it for its side effects, as a program that wants every
// device it can find does.
//
// # Usage
//
//	import _ "github.com/adaptsched/adaptsched/backends/all"
//
//	for _, name := range backends.Drivers() {
//		b, err := backends.Open(name)
//		if err != nil {
//			continue // err says why (errors.Is(err, backends.ErrUnavailable))
//		}
//		defer b.Close()
//	}
package all
