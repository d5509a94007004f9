// Package backends defines what adaptsched schedules onto: the Backend
// interface (a device that allocates buffers, copies to and from host
// memory and runs kernels.Spec ops), the Timing of every kernel and
// transfer, the registry of backend drivers, and the sentinel errors that
// let the scheduler tell a capability gap (ErrUnsupported) from a failure
// (ErrOutOfMemory, ErrDeviceLost, ErrTransient).
//
// Backends register themselves in init, as database/sql drivers do; the
// package backends/all imports every backend of this module.
//
// # Usage
//
//	import _ "github.com/adaptsched/adaptsched/backends/all"
//
//	b, err := backends.Open("cpu")          // or "cpu1", "sim:h100", "rocm"
//	if errors.Is(err, backends.ErrUnavailable) {
//		// err says why: libraries tried, devices found
//	}
//	defer b.Close()
//	in, _ := b.Alloc(spec.InBytes(0))
//	_, _ = b.Write(in, data)
//	out, _ := b.Alloc(spec.OutBytes())
//	t, err := b.Run(spec, []backends.Buffer{in}, out)
//	fmt.Println(t.Micros(), t.Clock)
//
// Optional capabilities are separate interfaces found by type assertion;
// each documents what happens when a backend lacks it.
package backends
