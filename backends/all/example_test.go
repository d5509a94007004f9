package all_test

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/all"
)

// Every registered backend is opened; one that cannot run here (a GPU
// without its libraries or device) answers an error that says why
// (errors.Is(err, backends.ErrUnavailable)) and is left out.
func Example() {
	var opened []backends.Backend
	for _, name := range backends.Drivers() {
		b, err := backends.Open(name)
		if err != nil {
			continue
		}
		opened = append(opened, b)
	}
	for _, b := range opened {
		if b.Info().Name == "cpu1" {
			fmt.Println(b.Info().Name, b.Info().Kind, b.Info().Threads)
		}
		b.Close()
	}
	// Output: cpu1 cpu 1
}
