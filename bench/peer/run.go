package peer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
)

// Result is one scheduler's run of a stream. The halves split at the
// drift (Stream.Drift.From).
type Result struct {
	Tasks int
	// Total is the wall time from the first task's submission to the
	// last one's end; Half1 ends, and Half2 starts, when the last task
	// before the drift ends.
	Total, Half1, Half2 time.Duration
	// Kernel1 and Kernel2 are the time spent inside the implementations
	// (peer_exec, drift included) in each half.
	Kernel1, Kernel2 time.Duration
	// Chosen counts the tasks of each half run by each implementation.
	Chosen [2][numImpls]int
	// PerShape holds, for each shape of the stream, each half and each
	// implementation, the tasks run and their time inside the kernels.
	PerShape [][2][numImpls]Cell
	// EmptyAsync is StarPU's ns per empty task when they are all
	// submitted and then waited for together (0 for adaptsched).
	EmptyAsync float64
}

// Cell is a count of tasks and their summed kernel time.
type Cell struct {
	N  int
	Ns int64
}

// Mean returns the cell's mean ns per task, or +Inf for an empty cell.
func (c Cell) Mean() float64 {
	if c.N == 0 {
		return math.Inf(1)
	}
	return float64(c.Ns) / float64(c.N)
}

// Store is a posterior store (history.DB): Load gives the warm start,
// Write keeps what the run learns.
type Store interface {
	Load() map[learned.Key]bandit.NormalGamma
	relay.Store
}

// RunOptions configure RunAdaptsched.
type RunOptions struct {
	// Store, when not nil, is the Scheduler's posterior store: an empty
	// one starts cold and learns into it (through a relay), one a
	// previous run filled starts warm (Config.Warm). The caller closes
	// it.
	Store Store
	// Seed seeds the Scheduler (Config.Seed).
	Seed uint64
	// Delays are the drift's busy-wait per shape (Calibrate); nil runs
	// the stream without its drift.
	Delays []time.Duration
}

// matmul returns the spec of sh.
func matmul(sh Shape) kernels.Spec {
	return kernels.Spec{Op: kernels.MatMul, DType: kernels.F32,
		In: []kernels.Shape{{sh.M, sh.K}, {sh.K, sh.N}}}
}

// operands are one shape's host matrices, mapped by each device.
type operands struct {
	spec kernels.Spec
	res  adaptive.Residency
	in   [numImpls][]backends.Buffer
	out  [numImpls]backends.Buffer
}

// newScheduler opens both implementations and a Scheduler over them,
// configured as for a cold start: no calibration (both take the same
// documented CPU defaults), so that the cost model favours neither.
func newScheduler(empty bool, o RunOptions) (*adaptive.Scheduler, [numImpls]*Device, error) {
	var devs [numImpls]*Device
	bes := make([]backends.Backend, numImpls)
	for i := range numImpls {
		d, err := NewDevice(i, empty)
		if err != nil {
			return nil, devs, err
		}
		devs[i], bes[i] = d, d
	}
	cfg := adaptive.Config{Backends: bes, Seed: o.Seed, NoCalibration: true}
	if o.Store != nil {
		cfg.Warm = o.Store.Load()
	}
	s, err := adaptive.New(cfg)
	return s, devs, err
}

// newOperands allocates sh's matrices in host memory (filled as the
// StarPU program fills them) and maps them into every device, with the
// residency the Executor would pass: inputs valid in host memory and so
// on every device that maps it.
func newOperands(sh Shape, devs [numImpls]*Device) (*operands, error) {
	op := &operands{spec: matmul(sh)}
	a, b, c := filled(sh.M*sh.K), filled(sh.K*sh.N), filled(sh.M*sh.N)
	on := adaptive.Host
	for i := range devs {
		on |= adaptive.Backend(i)
	}
	op.res.Add(on, int64(4*len(a)))
	op.res.Add(on, int64(4*len(b)))
	for i, d := range devs {
		for _, m := range [][]float32{a, b} {
			buf, err := d.MapHost(kernels.AsBytes(m))
			if err != nil {
				return nil, err
			}
			op.in[i] = append(op.in[i], buf)
		}
		buf, err := d.MapHost(kernels.AsBytes(c))
		if err != nil {
			return nil, err
		}
		op.out[i] = buf
	}
	return op, nil
}

// filled returns n values, the same as peer_starpu.c's filled.
func filled(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i*7919)%13)/13 - 0.5
	}
	return v
}

// RunAdaptsched runs st through an adaptive.Scheduler over the two
// implementations, as the Executor drives it (executor.Executor.run):
// Select with the inputs' residency, Run on the chosen backend, Observe
// its Timing when positive. One goroutine runs every task, as StarPU's
// one CPU worker does.
func RunAdaptsched(st Stream, o RunOptions) (res Result, err error) {
	s, devs, err := newScheduler(false, o)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if o.Store != nil {
		rl, rerr := relay.Start(s, relay.Options{Store: o.Store})
		if rerr != nil {
			return Result{}, rerr
		}
		defer func() { // the Scheduler first: the relay's last round takes all
			s.Close()
			err = errors.Join(err, rl.Close())
		}()
	}
	ops := make([]*operands, len(st.Shapes))
	for i, sh := range st.Shapes {
		if ops[i], err = newOperands(sh, devs); err != nil {
			return Result{}, err
		}
	}
	r := Result{Tasks: len(st.Tasks), PerShape: make([][2][numImpls]Cell, len(st.Shapes))}
	var kern [2]time.Duration
	half := 0
	start := time.Now()
	for i, t := range st.Tasks {
		if i == st.Drift.From {
			if o.Delays != nil {
				devs[st.Drift.Impl].SetDrift(delayMap(st, o.Delays))
			}
			r.Half1, half = time.Since(start), 1
		}
		op := ops[t]
		d, err := s.Select(op.spec, op.res)
		if err != nil {
			return Result{}, fmt.Errorf("task %d: %w", i, err)
		}
		tm, err := devs[d.Backend].Run(op.spec, op.in[d.Backend], op.out[d.Backend])
		if err != nil {
			return Result{}, fmt.Errorf("task %d: %w", i, err)
		}
		if tm.Duration > 0 {
			_ = s.Observe(d, tm) // as the Executor: a zero timing teaches nothing
		}
		kern[half] += tm.Duration
		r.Chosen[half][d.Backend]++
		c := &r.PerShape[t][half][d.Backend]
		c.N++
		c.Ns += int64(tm.Duration)
	}
	r.Total = time.Since(start)
	if half == 0 {
		r.Half1 = r.Total
	}
	r.Half2 = r.Total - r.Half1
	r.Kernel1, r.Kernel2 = kern[0], kern[1]
	return r, nil
}

// Overhead returns the wall time per task of n empty tasks through the
// Scheduler (Select, Run of the empty probe, Observe): its per-task
// scheduling overhead, to compare with StarPU's submit and wait of an
// empty codelet. n must be at least 1 (TestOverhead).
func Overhead(n int) (time.Duration, error) {
	if n < 1 {
		return 0, fmt.Errorf("peer: an overhead probe of %d empty tasks: want at least 1", n)
	}
	s, devs, err := newScheduler(true, RunOptions{})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	op, err := newOperands(Shape{M: 1, K: 1, N: 1}, devs)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for range n {
		d, err := s.Select(op.spec, op.res)
		if err != nil {
			return 0, err
		}
		tm, err := devs[d.Backend].Run(op.spec, op.in[d.Backend], op.out[d.Backend])
		if err != nil {
			return 0, err
		}
		if tm.Duration > 0 {
			_ = s.Observe(d, tm)
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// Oracle is the best fixed implementation per shape in hindsight. Each
// implementation is measured on every shape apart, before and under the
// drift, by running the stream once with both implementations on every
// task, one after the other on the same operands, the order alternating
// with each occurrence of a shape. Both are so timed in the same minutes
// and with the caches as the stream leaves them (half of the time after
// the other implementation has read the operands, for each alike). A run
// per implementation would not do: a shared machine's speed moves
// between runs, and a shape timed in a tight loop keeps its operands in
// cache, faster than any policy can be.
//
// The best implementation of a shape is the one with the lower median:
// a preemption of a few ms lands on a 20 µs kernel now and then whatever
// runs it, and in a mean it outweighs the implementations' difference.
type Oracle struct {
	// Mean and Median hold each shape's mean and median ns on each
	// implementation, before ([shape][0]) and under ([shape][1]) the
	// drift.
	Mean, Median [][2][numImpls]float64
	// Half1 and Half2 are the oracle's kernel time over each half of the
	// stream: each task at the mean of its shape's best implementation;
	// Total is their sum. It compares with a scheduler's measured time.
	Total, Half1, Half2 time.Duration
	// Typical1 and Typical2 are the same at the medians: what Price
	// compares with.
	Typical1, Typical2 time.Duration
	// Only is each implementation's time over the stream, alone (means).
	Only [numImpls]time.Duration
}

// delayMap returns delays by shape.
func delayMap(st Stream, delays []time.Duration) map[Shape]int64 {
	m := make(map[Shape]int64, len(st.Shapes))
	for i, sh := range st.Shapes {
		m[sh] = int64(delays[i])
	}
	return m
}

// Calibrate returns the drift's busy-wait for each shape of st: (Factor −
// 1) × the median time of the drifted implementation's kernel on it,
// measured by running the first half of st (or, for a shape it lacks,
// 11 calls in a row) on that implementation alone, so that its operands
// find the caches as in the stream. Both schedulers get the same delays
// (the StarPU program reads them from a file, WriteDelays).
func Calibrate(st Stream) ([]time.Duration, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	ops := make([][3][]float32, len(st.Shapes))
	for i, sh := range st.Shapes {
		ops[i] = [3][]float32{filled(sh.M * sh.K), filled(sh.K * sh.N), filled(sh.M * sh.N)}
	}
	samples := make([][]int64, len(st.Shapes))
	run := func(t int) {
		op := ops[t]
		samples[t] = append(samples[t], execKernel(st.Drift.Impl, false, 0, st.Shapes[t], op[0], op[1], op[2]))
	}
	for _, t := range st.Tasks[:st.Drift.From] {
		run(t)
	}
	delays := make([]time.Duration, len(st.Shapes))
	for i := range st.Shapes {
		for len(samples[i]) < 11 {
			run(i)
		}
		delays[i] = time.Duration((st.Drift.Factor - 1) * median(samples[i]))
	}
	return delays, nil
}

// WriteDelays writes delays as the StarPU program reads them: one ns
// count a line, in the stream's shape order.
func WriteDelays(w io.Writer, delays []time.Duration) error {
	for _, d := range delays {
		if _, err := fmt.Fprintln(w, int64(d)); err != nil {
			return err
		}
	}
	return nil
}

// MeasureOracle measures both implementations on every task of st, with
// the drift's delays, and returns the oracle of st. A shape that a half
// of st does not hold takes the other half's mean (times the drift's
// factor for the drifted implementation).
func MeasureOracle(st Stream, delays []time.Duration) (Oracle, error) {
	if err := Load(); err != nil {
		return Oracle{}, err
	}
	samples := make([][2][numImpls][]int64, len(st.Shapes))
	type operand struct{ a, b, c []float32 }
	ops := make([]operand, len(st.Shapes))
	for i, sh := range st.Shapes {
		ops[i] = operand{filled(sh.M * sh.K), filled(sh.K * sh.N), filled(sh.M * sh.N)}
	}
	seen := make([]int, len(st.Shapes))
	for i, t := range st.Tasks {
		half := 0
		if i >= st.Drift.From {
			half = 1
		}
		op, sh := ops[t], st.Shapes[t]
		for j := range numImpls {
			impl := (Impl(seen[t]) + j) % numImpls
			var extra int64
			if half == 1 && impl == st.Drift.Impl && delays != nil {
				extra = int64(delays[t])
			}
			c := &samples[t][half][impl]
			*c = append(*c, execKernel(impl, false, extra, sh, op.a, op.b, op.c))
		}
		seen[t]++
	}
	o := Oracle{Mean: make([][2][numImpls]float64, len(st.Shapes)), Median: make([][2][numImpls]float64, len(st.Shapes))}
	for i := range st.Shapes {
		for impl := range numImpls {
			f := 1.0
			if impl == st.Drift.Impl {
				f = st.Drift.Factor
			}
			for _, stat := range []struct {
				m  *[2][numImpls]float64
				fn func([]int64) float64
			}{{&o.Mean[i], mean}, {&o.Median[i], median}} {
				m := stat.m
				m[0][impl], m[1][impl] = stat.fn(samples[i][0][impl]), stat.fn(samples[i][1][impl])
				if math.IsInf(m[0][impl], 1) {
					m[0][impl] = m[1][impl] / f
				}
				if math.IsInf(m[1][impl], 1) {
					m[1][impl] = m[0][impl] * f
				}
			}
		}
	}
	first, second := st.Counts()
	var h, typ [2]float64
	var only [numImpls]float64
	for i := range st.Shapes {
		b1, b2 := o.Best(i, false), o.Best(i, true)
		h[0] += tasksAt(first[i], o.Mean[i][0][b1])
		h[1] += tasksAt(second[i], o.Mean[i][1][b2])
		typ[0] += tasksAt(first[i], o.Median[i][0][b1])
		typ[1] += tasksAt(second[i], o.Median[i][1][b2])
		for impl := range numImpls {
			only[impl] += tasksAt(first[i], o.Mean[i][0][impl]) + tasksAt(second[i], o.Mean[i][1][impl])
		}
	}
	o.Half1, o.Half2 = time.Duration(h[0]), time.Duration(h[1])
	o.Typical1, o.Typical2 = time.Duration(typ[0]), time.Duration(typ[1])
	o.Total = o.Half1 + o.Half2
	for impl := range numImpls {
		o.Only[impl] = time.Duration(only[impl])
	}
	return o, nil
}

// Best returns the oracle's implementation for shape i before (drifted
// false) or under the drift: the lower median.
func (o Oracle) Best(i int, drifted bool) Impl {
	h := 0
	if drifted {
		h = 1
	}
	if o.Median[i][h][Blocked] < o.Median[i][h][BLAS] {
		return Blocked
	}
	return BLAS
}

// Price returns the time r's choices would take at the oracle's medians:
// each task priced at its shape's median on the implementation that r
// chose for it, per half. Unlike r's own times it does not depend on how
// busy the machine was while r ran, only on which implementation r
// picked, so it compares schedulers that ran in different minutes of a
// shared machine; its ratio to Typical1 and Typical2 is the decisions'
// regret.
func (o Oracle) Price(r Result) (half1, half2 time.Duration) {
	var h [2]float64
	for s := range min(len(r.PerShape), len(o.Median)) {
		for half := range 2 {
			for impl := range numImpls {
				h[half] += tasksAt(r.PerShape[s][half][impl].N, o.Median[s][half][impl])
			}
		}
	}
	return time.Duration(h[0]), time.Duration(h[1])
}

// tasksAt returns the time of n tasks of ns each: 0 for none, whatever
// ns. Rule: never n × ns for n = 0. Reason: a shape that no task runs
// has +Inf means and medians (mean, median), and 0 × +Inf made the
// oracle's totals and every price NaN (TestOracleUnusedShape).
func tasksAt(n int, ns float64) float64 {
	if n == 0 {
		return 0
	}
	return float64(n) * ns
}

// mean returns the mean of v, or +Inf when v is empty.
func mean(v []int64) float64 {
	if len(v) == 0 {
		return math.Inf(1)
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	return sum / float64(len(v))
}

// median returns the median of v (sorting it), or +Inf when v is empty.
func median(v []int64) float64 {
	if len(v) == 0 {
		return math.Inf(1)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (float64(v[n/2-1]) + float64(v[n/2])) / 2
	}
	return float64(v[len(v)/2])
}
