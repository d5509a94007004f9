package relay_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/relay"
)

// A Scheduler warm-started from a store, and the relay that writes what
// it learns back: after a round the store holds every observation.
func ExampleStart() {
	db, err := history.Open(history.DefaultOptions("").WithInMemory(true).WithLogger(zerolog.Nop()))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	cpu := backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 20, DispatchUs: 1}})
	s, err := adaptive.New(adaptive.Config{Backends: []backends.Backend{cpu}, Warm: db.Load(), Seed: 1})
	if err != nil {
		panic(err)
	}
	r, err := relay.Start(s, relay.Options{Store: db})
	if err != nil {
		panic(err)
	}
	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 512}, {512, 512}}}
	for range 10 {
		d, _ := s.Select(spec, adaptive.Residency{})
		s.Observe(d, backends.Timing{Duration: 300 * time.Microsecond, Clock: backends.WallClock})
	}
	if err := r.Flush(context.Background()); err != nil {
		panic(err)
	}
	for _, rec := range db.Records() {
		fmt.Printf("%s %s: %d observations stored\n", rec.Key.Backend, rec.Key.Bucket, rec.N)
	}
	s.Close() // the Scheduler first: the relay's last round takes what remains
	fmt.Println(r.Close())
	// Output:
	// cpu MatMul/f32/s50: 10 observations stored
	// <nil>
}
