package adaptive

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// TestTransfers checks DESIGN.md § Priors (transfers): each backend's
// cost includes latency + bytes/bandwidth of the inputs it lacks, over the
// nominal 20 µs, 25 GB/s link of the test GPU, and of sending its output
// back to where its largest moved input lived.
func TestTransfers(t *testing.T) {
	s := newTestScheduler(t, Config{Strategy: CPUPreferred, Seed: 1})
	spec := matmul(64, 512, 512)
	link := func(bytes float64) float64 { return 20 + bytes/25e3 }
	a, w := float64(spec.InBytes(0)), float64(spec.InBytes(1))
	o := float64(spec.OutBytes())

	var host Residency
	host.Add(Host, spec.InBytes(0))
	host.Add(0, spec.InBytes(1)) // 0 means host memory too
	d, err := s.Select(spec, host)
	if err != nil {
		t.Fatal(err)
	}
	// The GPU fetches both inputs from host memory and returns the output.
	if want := link(a) + link(w) + link(o); math.Abs(d.Transfer[1]-want) > 1e-9 || d.Transfer[0] != 0 {
		t.Errorf("host inputs: transfers %v, want [0 %v]", d.Transfer[:2], want)
	}
	// Means, not samples, under CPUPreferred: the estimate is the prior
	// mean plus the transfer.
	if want := 10 + 33554432/10000e3 + d.Transfer[1]; math.Abs(d.Estimates[1]/want-1) > 1e-9 {
		t.Errorf("gpu estimate %v, want %v", d.Estimates[1], want)
	}

	var mixed Residency
	mixed.Add(Host, spec.InBytes(0))
	mixed.Add(Backend(1), spec.InBytes(1)) // weights on the GPU
	d, _ = s.Select(spec, mixed)
	// The GPU fetches the activations from host memory and returns its
	// output there; the CPU fetches the weights (the larger input) from
	// the GPU and sends its output back to it.
	if math.Abs(d.Transfer[1]-link(a)-link(o)) > 1e-9 || math.Abs(d.Transfer[0]-link(w)-link(o)) > 1e-9 {
		t.Errorf("mixed: transfers %v, want [%v %v]", d.Transfer[:2], link(w)+link(o), link(a)+link(o))
	}

	// Where the output was read last time (Residency.Consumers) replaces
	// the guess: read by the GPU, the CPU pays sending it there and the
	// GPU nothing; read by the program, the GPU pays bringing it back.
	gpuReads := mixed
	gpuReads.Consumers = Backend(1)
	d, _ = s.Select(spec, gpuReads)
	if math.Abs(d.Transfer[1]-link(a)) > 1e-9 || math.Abs(d.Transfer[0]-link(w)-link(o)) > 1e-9 {
		t.Errorf("read by the GPU: transfers %v, want [%v %v]", d.Transfer[:2], link(w)+link(o), link(a))
	}
	hostReads := mixed
	hostReads.Consumers = Host | Backend(0)
	d, _ = s.Select(spec, hostReads)
	if math.Abs(d.Transfer[1]-link(a)-link(o)) > 1e-9 || math.Abs(d.Transfer[0]-link(w)) > 1e-9 {
		t.Errorf("read by the host: transfers %v, want [%v %v]", d.Transfer[:2], link(w), link(a)+link(o))
	}

	// Automatic: 1 GiB of weights in host memory make the CPU cheaper
	// (5.4 ms of compute against 43 ms of copying); on the GPU, the GPU.
	s = newTestScheduler(t, Config{Seed: 2})
	big := matmul(1, 16384, 16384)
	var onHost, onGPU Residency
	onHost.Add(Host, big.InBytes(1))
	onGPU.Add(Backend(1), big.InBytes(1))
	if d, _ := s.Select(big, onHost); d.Name != "cpu" {
		t.Errorf("weights on host: chose %s (estimates %v)", d.Name, d.Estimates[:2])
	}
	if d, _ := s.Select(matmul(2, 16384, 16384), onGPU); d.Name != "gpu" {
		t.Errorf("weights on gpu: chose %s (estimates %v)", d.Name, d.Estimates[:2])
	}
}

// TestLinkModel checks that measured copies teach the link model a link
// unlike its nominal figures: 8 µs latency, 12 GB/s, 3% noise. Tolerance:
// predictions within 10% at 4 KiB and 64 MiB after 300 copies.
func TestLinkModel(t *testing.T) {
	s := newTestScheduler(t, Config{})
	r := rand.New(rand.NewPCG(11, 12))
	truth := func(bytes float64) float64 { return 8 + bytes/12e3 }
	for range 300 {
		bytes := math.Exp2(12 + 16*r.Float64())
		if err := s.ObserveTransfer("gpu", true, int64(bytes), us(lognormal(r, truth(bytes), 0.03))); err != nil {
			t.Fatal(err)
		}
	}
	for _, bytes := range []float64{4096, 64 << 20} {
		got, want := s.PredictTransfer("gpu", true, int64(bytes)), truth(bytes)
		if math.Abs(got/want-1) > 0.1 {
			t.Errorf("%v bytes: predicted %.1f µs, want %.1f", bytes, got, want)
		}
	}
	if got := s.PredictTransfer("gpu", false, 1<<20); math.Abs(got-(20+(1<<20)/25e3)) > 1e-9 {
		t.Errorf("device→host untouched: %v", got)
	}
	for _, l := range s.Telemetry().Links {
		if l.ToDevice && (l.Copies != 300 || math.Abs(l.GBps/12-1) > 0.1) {
			t.Errorf("link telemetry %+v, want 300 copies at about 12 GB/s", l)
		}
	}
	if err := s.ObserveTransfer("cpu", true, 1, us(1)); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("cpu link: %v", err)
	}
	if err := s.ObserveTransfer("gpu", true, 0, us(1)); !errors.Is(err, ErrBadTiming) {
		t.Errorf("zero bytes: %v", err)
	}
	for _, i := range []int{-1, 0, 2} { // out of range, cpu (no link), beyond the backends
		if err := s.ObserveTransferAt(i, true, 1, us(1)); !errors.Is(err, ErrUnknownBackend) {
			t.Errorf("backend %d: %v", i, err)
		}
	}
}

// TestObserveTransferAt checks that a copy observed by index teaches the
// link that the same copy observed by name does.
func TestObserveTransferAt(t *testing.T) {
	byName, byIndex := newTestScheduler(t, Config{}), newTestScheduler(t, Config{})
	for i := range 50 {
		bytes := int64(4096) << (i % 12)
		took := us(10 + float64(bytes)/5e3)
		if err := byName.ObserveTransfer("gpu", i%2 == 0, bytes, took); err != nil {
			t.Fatal(err)
		}
		if err := byIndex.ObserveTransferAt(1, i%2 == 0, bytes, took); err != nil {
			t.Fatal(err)
		}
	}
	for _, toDevice := range []bool{true, false} {
		if a, b := byName.PredictTransfer("gpu", toDevice, 1<<20), byIndex.PredictTransfer("gpu", toDevice, 1<<20); a != b {
			t.Errorf("toDevice %v: %v µs by name, %v by index", toDevice, a, b)
		}
	}
}

// TestObserveErrors checks bad input to Observe.
func TestObserveErrors(t *testing.T) {
	s := newTestScheduler(t, Config{})
	other := newTestScheduler(t, Config{})
	d, err := s.Select(matmul(8, 8, 8), Residency{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range []backends.Timing{{}, us(-1), us(2e12)} {
		if err := s.Observe(d, tm); !errors.Is(err, ErrBadTiming) {
			t.Errorf("%v: %v", tm.Duration, err)
		}
	}
	if err := other.Observe(d, us(1)); !errors.Is(err, ErrForeignDecision) {
		t.Errorf("foreign: %v", err)
	}
	if err := s.Observe(Decision{}, us(1)); !errors.Is(err, ErrForeignDecision) {
		t.Errorf("zero decision: %v", err)
	}
	if err := other.ObserveTicket(&d.Ticket, us(1)); !errors.Is(err, ErrForeignDecision) {
		t.Errorf("foreign ticket: %v", err)
	}
	if err := s.ObserveTicket(&d.Ticket, us(-1)); !errors.Is(err, ErrBadTiming) || !strings.Contains(err.Error(), d.Name) {
		t.Errorf("ticket's bad timing: %v, want ErrBadTiming naming %s", err, d.Name)
	}
	s.Close()
	if _, err := s.Select(matmul(8, 8, 8), Residency{}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestStore checks the warm start and the changes as data of DESIGN.md §
// Persistence: a stored posterior is the arm's starting point, an Observe
// marks its bucket's record, and Changes then hands out the updated
// posterior and the observation, once; after Close, Changes hands out
// what changed since, and again after an Observe after Close.
func TestStore(t *testing.T) {
	st := &memStore{}
	stored := bandit.NewPrior(7, 50, 0.1) // 50 pseudo-observations at 7 µs
	k := learned.Key{Backend: "gpu", Bucket: "MatMul/f32/s50"}
	st.put(k, stored)
	s := newTestScheduler(t, Config{Warm: st.warm(), Seed: 4})
	s.Track(1)
	spec := matmul(64, 512, 512)
	d, err := s.Select(spec, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "gpu" || d.Reason == Prior {
		t.Errorf("warm bucket: %s %v, want gpu with data", d.Name, d.Reason)
	}
	if got := s.Telemetry().Buckets[0].Arms[1].MeanUs; math.Abs(got/7-1) > 1e-9 {
		t.Errorf("warm mean %v µs, want 7", got)
	}
	if err := s.Observe(d, us(9)); err != nil {
		t.Fatal(err)
	}
	rep := reported(s)
	recs := st.collect(s)
	p := st.m[k]
	if rep != 1 || recs != 1 || st.n[k] != 1 || !(p.Kappa > stored.Kappa*0.99) || p.Mu <= stored.Mu {
		t.Errorf("store after Observe: %d reported, %d collected, n %d, %+v", rep, recs, st.n[k], p)
	}
	if recs := st.collect(s); recs != 0 {
		t.Errorf("a second collection took %d records, want none", recs)
	}
	d, _ = s.Select(spec, Residency{})
	late, _ := s.Select(spec, Residency{})
	s.Observe(d, us(9))
	s.Close()
	st.collect(s)
	if st.n[k]+st.n[learned.Key{Backend: "cpu", Bucket: k.Bucket}] != 2 {
		t.Errorf("after Close: %v observations stored, want 2", st.n)
	}
	s.Observe(late, us(9))
	st.collect(s)
	if st.n[k]+st.n[learned.Key{Backend: "cpu", Bucket: k.Bucket}] != 3 {
		t.Errorf("after an Observe after Close: %v observations stored, want 3", st.n)
	}
}

// TestStoreAllocs holds DESIGN.md § The data path's "0 allocs" with
// changes tracked: an Observe that queues its bucket for Changes and
// counts its records allocates nothing, nor does one of a bucket already
// queued.
func TestStoreAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	st := &memStore{}
	s := newTestScheduler(t, Config{Seed: 1})
	s.Track(1)
	specs := make([]kernels.Spec, 300)
	for i := range specs {
		specs[i] = kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1024}},
			Params: kernels.Params{Name: "k" + strconv.Itoa(i), FLOPs: 1 << 20, Bytes: 1 << 16}}
	}
	op := func(i int) {
		d, err := s.Select(specs[i%len(specs)], Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Observe(d, us(10)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range specs { // every bucket made
		op(i)
	}
	withData := 0 // arms learned from: a GPU's warm-up run is not
	for _, bt := range s.Telemetry().Buckets {
		for _, at := range bt.Arms {
			if at.Learned > 0 {
				withData++
			}
		}
	}
	if got := reported(s); got != int64(withData) || withData == 0 {
		t.Fatalf("%d records reported, want the %d arms with data", got, withData)
	}
	for _, queued := range []bool{false, true} {
		if !queued {
			st.collect(s) // none queued: each Observe below queues its bucket
		}
		i := 0
		if n := testing.AllocsPerRun(200, func() { op(i); i++ }); n != 0 {
			t.Errorf("queued %v: %v allocs per Select+Observe, want 0", queued, n)
		}
	}
}

// TestTelemetry checks the counters against a tally kept here (the
// commands serve them as metrics: cmd/infer -metrics).
func TestTelemetry(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 9})
	r := rand.New(rand.NewPCG(9, 10))
	var ops [2]int64
	var total [2]float64
	var why [2][NumReasons]int64
	specs := []kernels.Spec{matmul(1, 512, 512), matmul(64, 512, 512), matmul(512, 512, 512)}
	for i := range 300 {
		d, err := s.Select(specs[i%3], Residency{})
		if err != nil {
			t.Fatal(err)
		}
		x := math.Round(lognormal(r, []float64{50, 20}[d.Backend], 0.3))
		ops[d.Backend]++
		why[d.Backend][d.Reason]++
		total[d.Backend] += x
		if err := s.Observe(d, us(x)); err != nil {
			t.Fatal(err)
		}
	}
	tel := s.Telemetry()
	if tel.Decisions != 300 || len(tel.Buckets) != 3 {
		t.Fatalf("decisions %d, buckets %d", tel.Decisions, len(tel.Buckets))
	}
	for a, b := range tel.Backends {
		if b.Ops != ops[a] || b.Decisions != ops[a] || math.Abs(b.Time.Seconds()*1e6-total[a]) > 1e-3 {
			t.Errorf("%s: %+v, want %d ops, %v µs", b.Name, b, ops[a], total[a])
		}
		if b.Reasons != why[a] {
			t.Errorf("%s: decisions by reason %v, want %v", b.Name, b.Reasons, why[a])
		}
	}
	var sum int64
	for _, n := range tel.Reasons {
		sum += n
	}
	if sum != 300 {
		t.Errorf("reasons %v sum to %d", tel.Reasons, sum)
	}
	for _, b := range tel.Buckets {
		for _, a := range b.Arms {
			if !(a.Lo90Us < a.MeanUs && a.MeanUs < a.Hi90Us) {
				t.Errorf("%s/%s: interval [%v, %v] around %v", b.Name, a.Backend, a.Lo90Us, a.Hi90Us, a.MeanUs)
			}
		}
	}

	for _, b := range tel.Backends {
		if b.Time != time.Duration(b.ComputeUs*float64(time.Microsecond)) {
			t.Errorf("%s: Time %v, ComputeUs %v µs", b.Name, b.Time, b.ComputeUs)
		}
	}
}

// TestInterval checks the 90% credible interval against a Monte Carlo of
// the Normal-Gamma posterior (τ ~ Gamma(α, β), μ ~ N(Mu, 1/(κτ))).
// Tolerance: 2% on each end with 200,000 draws.
func TestInterval(t *testing.T) {
	p := bandit.NormalGamma{Mu: 4, Kappa: 6, Alpha: 4, Beta: 0.3}
	r := rand.New(rand.NewPCG(13, 14))
	g := distuv.Gamma{Alpha: p.Alpha, Beta: p.Beta, Src: r}
	const n = 200000
	xs := make([]float64, n)
	for i := range xs {
		tau := g.Rand()
		xs[i] = math.Exp(p.Mu + r.NormFloat64()/math.Sqrt(p.Kappa*tau) + p.Variance()/2)
	}
	sort.Float64s(xs)
	lo, hi := interval(p)
	if math.Abs(lo/xs[n/20]-1) > 0.02 || math.Abs(hi/xs[n-n/20]-1) > 0.02 {
		t.Errorf("interval [%v, %v], Monte Carlo [%v, %v]", lo, hi, xs[n/20], xs[n-n/20])
	}
}

// TestConcurrent runs Select/Observe from many goroutines on shared and
// private buckets (run it with -race) and checks that no observation is
// lost.
func TestConcurrent(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 10, Shards: 4})
	const workers, iters = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range iters {
				spec := matmul(1+i%37, 64, 64+w%2)
				var res Residency
				res.Add(Host, spec.InBytes(0))
				d, err := s.Select(spec, res)
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Observe(d, us(1+r.Float64()*100)); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					_ = s.Telemetry()
					_ = s.ObserveTransfer("gpu", true, 4096, us(10))
				}
			}
		}()
	}
	wg.Wait()
	tel := s.Telemetry()
	var ops int64
	for _, b := range tel.Backends {
		ops += b.Ops
	}
	if ops != workers*iters || tel.Decisions != workers*iters {
		t.Errorf("ops %d, decisions %d, want %d", ops, tel.Decisions, workers*iters)
	}
}

// calibrating is a fake CPU that offers backends.Calibrator: its kernels
// take 4 µs + FLOPs at 50 GFLOP/s, which Calibrate reports.
type calibrating struct {
	*fakeBackend
	calls atomic.Int64
}

func (c *calibrating) Calibrate() (backends.Nominal, error) {
	c.calls.Add(1)
	return backends.Nominal{GFLOPS: 50, MemGBps: 10, DispatchUs: 4}, nil
}

// TestCalibrator checks that New calibrates a CPU with zero figures that
// offers backends.Calibrator and builds its priors from the result:
// dispatch + FLOPs / 50 GFLOP/s for a compute-bound matmul; that a CPU
// without it, or under NoCalibration, takes the default figures (1 µs +
// FLOPs / 100 GFLOP/s); and that one with figures is not asked.
// backends/cpu's TestCalibration checks the measurement itself.
func TestCalibrator(t *testing.T) {
	spec := matmul(64, 512, 512)
	prior := func(b backends.Backend, noCal bool) float64 {
		t.Helper()
		s, err := New(Config{Backends: []backends.Backend{b}, NoCalibration: noCal})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Select(spec, Residency{}); err != nil {
			t.Fatal(err)
		}
		return s.Telemetry().Buckets[0].Arms[0].MeanUs
	}
	c := &calibrating{fakeBackend: newFake("cpu", backends.CPU, backends.Nominal{})}
	if got, want := prior(c, false), 4+33554432/50e3; math.Abs(got/want-1) > 1e-3 || c.calls.Load() != 1 {
		t.Errorf("calibrated prior %v µs after %d calls, want %v after 1", got, c.calls.Load(), want)
	}
	for _, b := range []backends.Backend{newFake("cpu", backends.CPU, backends.Nominal{}), c} {
		if got, want := prior(b, b == c), 1+33554432/100e3; math.Abs(got/want-1) > 1e-3 {
			t.Errorf("default prior %v µs, want %v", got, want)
		}
	}
	c = &calibrating{fakeBackend: newFake("cpu", backends.CPU, cpuNominal)}
	if prior(c, false); c.calls.Load() != 0 {
		t.Errorf("a CPU with figures was calibrated")
	}
}

// TestQueueWait checks Residency.QueueUs: each arm's expected wait joins
// its cost as a priced transfer does (estimates, not Transfer), so that an
// op moves off a busy device to an idle one, and a zero wait changes
// nothing.
func TestQueueWait(t *testing.T) {
	s := newTestScheduler(t, Config{Strategy: CPUPreferred, Seed: 1})
	spec := matmul(64, 512, 512)
	var res Residency
	res.Add(Host, spec.InBytes(0))
	idle, err := s.Select(spec, res)
	if err != nil {
		t.Fatal(err)
	}
	busy := res
	busy.QueueUs[0], busy.QueueUs[1] = 300, 1e4
	d, _ := s.Select(spec, busy)
	for a, w := range []float64{300, 1e4} {
		if got := d.Estimates[a] - idle.Estimates[a]; math.Abs(got-w) > 1e-6 {
			t.Errorf("arm %d: wait added %v, want %v", a, got, w)
		}
		if d.Transfer[a] != idle.Transfer[a] {
			t.Errorf("arm %d: transfer %v changed to %v by the wait", a, idle.Transfer[a], d.Transfer[a])
		}
	}

	// Automatic: weights on the GPU make it the choice, until its queue
	// holds 100 ms of work while the CPU's is empty.
	s = newTestScheduler(t, Config{Seed: 2})
	big := matmul(2, 16384, 16384)
	var onGPU Residency
	onGPU.Add(Backend(1), big.InBytes(1))
	if d, _ := s.Select(big, onGPU); d.Name != "gpu" {
		t.Fatalf("idle gpu: chose %s (estimates %v)", d.Name, d.Estimates[:2])
	}
	onGPU.QueueUs[1] = 1e5
	if d, _ := s.Select(big, onGPU); d.Name != "cpu" {
		t.Errorf("gpu queue of 100 ms: chose %s (estimates %v)", d.Name, d.Estimates[:2])
	}
}

// TestLogger: with a logger that enables debug, a decision is logged with
// its bucket and estimates, and an incumbent switch at info; the levels
// are read in New (Config.Logger).
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newTestScheduler(t, Config{Seed: 2, Logger: log})
	defer s.Close()
	if _, err := s.Select(matmul(64, 512, 512), Residency{}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "adaptive: decision") || !strings.Contains(out, "bucket=MatMul/f32/") ||
		!strings.Contains(out, "estimates_us=") || !strings.Contains(out, "adaptive: backend figures") {
		t.Errorf("log lacks the decision or the backend figures:\n%s", out)
	}
}
