// Package executor runs ops adaptively: its Executor is a backends.Backend
// that places every op where an adaptive.Scheduler says, so code written
// against one backend runs on all of them unchanged (DESIGN.md § The data
// path). It uses only the Scheduler's exported API.
//
// Its buffers are Tensors that know where their valid copies live;
// inputs move lazily to the chosen backend, each copy timed and fed to the
// Scheduler's link model. A failing backend is backed off and the op runs
// on the next best one; a backend out of memory has its cold copies
// evicted; a lost device's tensors are recomputed from the ops that
// produced them. Stats and an optional trace Recorder report what it did.
//
// Run queues each op on its backend and returns at once (DESIGN.md §
// Queued execution): Read waits for what it reads, Sync and Close for
// everything; timings reach the Scheduler as the work completes, and a
// failed queued op runs again elsewhere. Submit also returns where the op
// was placed and why. Config.Synchronous makes every op wait for itself.
//
// The package registers the "adaptive" driver with the backends registry:
// backends.Open("adaptive:cpu,cpu1,sim:h100") opens the listed backends
// and an Executor that owns them.
//
// # Usage
//
//	ex, err := executor.New(executor.Config{Backends: bs})
//	if err != nil { ... }
//	defer ex.Close()
//	var be backends.Backend = ex // drop-in
//	x, _ := be.Alloc(spec.InBytes(0))
//	be.Write(x, data)
//	out, _ := be.Alloc(spec.OutBytes())
//	_, err = be.Run(spec, []backends.Buffer{x, ...}, out)
//	be.Read(result, out) // waits for the ops that produce out
//
// ExampleExecutor runs this with two CPU backends and a simulated GPU.
package executor
