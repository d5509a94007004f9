package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
)

// device is a stand-in CPU: the Scheduler only asks it for its Info and
// what it Supports.
type device struct{}

func (device) Info() backends.Info {
	return backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}}
}
func (device) Supports(kernels.Spec) error          { return nil }
func (device) Alloc(int64) (backends.Buffer, error) { return nil, errors.New("not a real device") }
func (device) Write(backends.Buffer, []byte) (backends.Timing, error) {
	return backends.Timing{}, errors.New("not a real device")
}
func (device) Read([]byte, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, errors.New("not a real device")
}
func (device) Run(kernels.Spec, []backends.Buffer, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, errors.New("not a real device")
}
func (device) Close() error { return nil }

// ExampleStart runs two nodes through a JetStream server embedded in the
// process: what node a learned becomes node b's prior.
func ExampleStart() {
	dir, _ := os.MkdirTemp("", "fleet-example")
	defer os.RemoveAll(dir)
	ns, err := fleet.Serve("", dir) // no listener: in-process clients only
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.WaitForShutdown()
	defer ns.Shutdown()
	fp := hardware.Fingerprint{Hash: "0123456789abcdef", Desc: "example"}
	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 512}, {512, 512}}}

	// A node, and the relay that carries what its Scheduler learns to it
	// and the fleet's evidence back.
	node := func(id string) (*adaptive.Scheduler, *relay.Relay, *fleet.Node) {
		nc, _ := fleet.Connect(nats.DefaultURL, zerolog.Nop(), fleet.InProcess(ns))
		n, _ := fleet.Start(nc, fleet.DefaultOptions(id, fp).WithInterval(10*time.Millisecond))
		s, _ := adaptive.New(adaptive.Config{Backends: []backends.Backend{device{}}})
		r, _ := relay.Start(s, relay.Options{Fleet: n, Interval: 10 * time.Millisecond})
		return s, r, n
	}
	a, ra, na := node("a")
	defer na.Close()
	defer ra.Close()
	for range 100 {
		d, _ := a.Select(spec, adaptive.Residency{})
		a.Observe(d, backends.Timing{Duration: 300 * time.Microsecond, Clock: backends.WallClock})
	}
	for ra.Flush(context.Background()) != nil {
		time.Sleep(10 * time.Millisecond)
	}

	b, rb, nb := node("b")
	defer nb.Close()
	defer rb.Close()
	b.Select(spec, adaptive.Residency{}) // makes the bucket
	k := learned.Key{Backend: "cpu", Bucket: kernels.BucketName(spec)}
	for {
		if _, foreign, _ := b.Fold().Evidence(k); foreign.N > 0 {
			// 100 runs, discounted by γ = 0.999 per run as a's bandit holds them.
			fmt.Printf("b's prior in %s holds %.1f of a's observations\n", k.Bucket, foreign.N)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output:
	// b's prior in MatMul/f32/s50 holds 95.1 of a's observations
}
