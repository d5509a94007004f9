package adaptive

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
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

// memStore is an in-memory Store. It collects the Scheduler only when
// told to (collect); changed counts the records reported.
type memStore struct {
	mu       sync.Mutex
	m        map[Key]bandit.NormalGamma
	n        map[Key]uint64 // the observations collected per key
	pull     func(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool)
	reported atomic.Int64
}

var _ Store = (*memStore)(nil)

func (m *memStore) Load(fn func(backend, bucket string, p bandit.NormalGamma)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, p := range m.m {
		fn(k.Backend, k.Bucket, p)
	}
	return nil
}

func (m *memStore) Attach(collect func(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool)) (
	changed func(bucket uint32, records int), detach func()) {
	m.pull = collect
	return func(_ uint32, n int) { m.reported.Add(int64(n)) }, func() { m.collect(false) }
}

// put stores p as k's posterior.
func (m *memStore) put(k Key, p bandit.NormalGamma) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[Key]bandit.NormalGamma{}
	}
	m.m[k] = p
}

// collect collects the attached Scheduler (flush: as a write would) and
// returns the records it gave.
func (m *memStore) collect(flush bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[Key]bandit.NormalGamma{}
	}
	if m.n == nil {
		m.n = map[Key]uint64{}
	}
	recs := 0
	m.pull(func(be, bu string, _, p bandit.NormalGamma, n uint64) {
		k := Key{Backend: be, Bucket: bu}
		m.m[k] = p
		m.n[k] += n
		recs++
	}, flush)
	return recs
}

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
