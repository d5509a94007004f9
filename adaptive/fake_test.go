package adaptive

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// fakeBackend is the test double of a backend: Info and Supports matter to
// the scheduler; Run reports a modelled timing (dispatch + flops at a
// fixed rate) without computing, for the calibration tests.
type fakeBackend struct {
	info        backends.Info
	unsupported map[kernels.Op]bool
	gflops      float64 // Run's modelled FLOP rate
	dispatchUs  float64 // Run's modelled overhead
	runs        atomic.Int64
	supports    atomic.Int64
}

var _ backends.Backend = (*fakeBackend)(nil)

func newFake(name string, kind backends.Kind, nom backends.Nominal, unsupported ...kernels.Op) *fakeBackend {
	f := &fakeBackend{
		info: backends.Info{Name: name, Kind: kind, Platform: "sim", Model: "fake " + name,
			Threads: 4, SharedMemory: kind == backends.CPU, Nominal: nom},
		unsupported: map[kernels.Op]bool{}, gflops: 50, dispatchUs: 4,
	}
	for _, op := range unsupported {
		f.unsupported[op] = true
	}
	return f
}

// Test figures: a CPU of 100 GFLOP/s and 50 GB/s; a GPU of 10 TFLOP/s,
// 1 TB/s, 10 µs launch, a 25 GB/s link with 20 µs latency.
var (
	cpuNominal = backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}
	gpuNominal = backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}
)

func (f *fakeBackend) Info() backends.Info { return f.info }

func (f *fakeBackend) Supports(s kernels.Spec) error {
	f.supports.Add(1)
	if f.unsupported[s.Op] {
		return fmt.Errorf("%w: %v on %s", backends.ErrUnsupported, s.Op, f.info.Name)
	}
	return nil
}

func (f *fakeBackend) Alloc(n int64) (backends.Buffer, error) {
	return backends.NewHostBuffer(f, n), nil
}

func (f *fakeBackend) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	b, err := backends.HostBytes(f, dst)
	if err != nil {
		return backends.Timing{}, err
	}
	copy(b, src)
	return backends.Timing{}, nil
}

func (f *fakeBackend) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	b, err := backends.HostBytes(f, src)
	if err != nil {
		return backends.Timing{}, err
	}
	copy(dst, b)
	return backends.Timing{}, nil
}

func (f *fakeBackend) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	f.runs.Add(1)
	us := f.dispatchUs + float64(s.Work().FLOPs)/(f.gflops*1e3)
	return backends.Timing{Duration: time.Duration(us * float64(time.Microsecond)), Clock: backends.Simulated}, nil
}

func (f *fakeBackend) Close() error { return nil }

// memStore keeps posteriors in memory, as a store behind the relay
// does: warm is a Scheduler's Config.Warm, and collect takes the
// Scheduler's Changes as a relay's round would.
type memStore struct {
	m map[learned.Key]bandit.NormalGamma
	n map[learned.Key]uint64 // the observations collected per key
}

// put stores p as k's posterior.
func (m *memStore) put(k learned.Key, p bandit.NormalGamma) {
	if m.m == nil {
		m.m = map[learned.Key]bandit.NormalGamma{}
	}
	m.m[k] = p
}

// warm returns a copy of the stored posteriors, for Config.Warm.
func (m *memStore) warm() map[learned.Key]bandit.NormalGamma { return maps.Clone(m.m) }

// collect takes s's changes and returns how many records they were.
func (m *memStore) collect(s *Scheduler) int {
	if m.n == nil {
		m.n = map[learned.Key]uint64{}
	}
	cs := s.Changes(nil)
	for _, c := range cs {
		m.put(c.Key, c.Posterior)
		m.n[c.Key] += c.N
	}
	return len(cs)
}

// reported returns the records that s's Observes counted since its last
// Changes (exact under Track(1)).
func reported(s *Scheduler) int64 { return s.track.Load().waiting.Load() }

// matmul returns an m×k by k×n f32 MatMul.
func matmul(m, k, n int) kernels.Spec {
	return kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, k}, {k, n}}}
}

// lognormal returns mean·exp(σ·N − σ²/2): a noisy duration whose mean is
// mean.
func lognormal(r *rand.Rand, mean, sigma float64) float64 {
	return mean * math.Exp(sigma*r.NormFloat64()-sigma*sigma/2)
}

// us is a Timing of x µs.
func us(x float64) backends.Timing {
	return backends.Timing{Duration: time.Duration(x * float64(time.Microsecond)), Clock: backends.Simulated}
}

// newTestScheduler builds a scheduler over a fake CPU and GPU (GPU lacks
// Softmax, CPU lacks RoPE) with cfg's other fields.
func newTestScheduler(t interface{ Fatal(...any) }, cfg Config) *Scheduler {
	if cfg.Backends == nil {
		cfg.Backends = []backends.Backend{
			newFake("cpu", backends.CPU, cpuNominal, kernels.RoPE),
			newFake("gpu", backends.GPU, gpuNominal, kernels.Softmax),
		}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
