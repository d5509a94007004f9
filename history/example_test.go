package history_test

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/rs/zerolog"
)

func Example() {
	fp := hardware.FingerprintOf([]backends.Info{{Kind: backends.CPU, Platform: "host", Model: "Example CPU", Arch: "amd64", Threads: 4}})
	db, err := history.Open(history.DefaultOptions("").WithInMemory(true).WithFingerprint(fp).WithLogger(zerolog.Nop()))
	if err != nil {
		panic(err)
	}
	prior := bandit.NewPrior(100, 1, 0.2)
	p := prior
	p.Update(4.6) // ln(≈100 µs)
	db.PutWithPrior(learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s20"}, prior, p)
	for k, p := range db.Load() { // a Scheduler's Config.Warm
		fmt.Printf("%s %s: κ=%.0f\n", k.Backend, k.Bucket, p.Kappa)
	}
	fmt.Println(db.Close())
	// Output:
	// cpu MatMul/f32/s20: κ=2
	// <nil>
}
