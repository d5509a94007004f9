package main

// Pass 1 of a trace replay: the scanner learns the backends, buckets and
// distinct ops, and finish sets every bucket's oracle.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// welford accumulates a bucket's measurements on one backend: the sum of
// µs (for the mean that the oracle compares) and the running mean and M2
// of ln µs (for the spread of counterfactual draws).
type welford struct {
	n        int64
	sum      float64
	mean, m2 float64
}

func (w *welford) add(us float64) {
	w.n++
	w.sum += us
	y := math.Log(us)
	d := y - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (y - w.mean)
}

func (w *welford) meanUs() float64 { return w.sum / float64(w.n) }

// sigma is the spread of ln µs, sim.DefaultSpread from fewer than two
// measurements.
func (w *welford) sigma() float64 {
	if w.n < 2 {
		return sim.DefaultSpread
	}
	return math.Sqrt(w.m2 / float64(w.n-1))
}

// specEntry is one distinct op of the trace: its task and, per backend,
// its model's mean duration (0: no model).
type specEntry struct {
	idx   int32 // in scanner.entries
	task  eval.Task
	spec  kernels.Spec
	class int // kernels.SizeClass of its work
	n     int64
	model [maxArms]float64
	sigma [maxArms]float64
	msrc  [maxArms]source
}

// bucketState is one bucket's statistics (pass 1) and oracle.
type bucketState struct {
	name     string
	ops      int64
	meas     [maxArms]welford
	modelSum [maxArms]float64
	modelN   [maxArms]int64
	mean     [maxArms]float64 // the oracle's mean µs per backend
	// traceMean and traceSigma are meas's mean µs and σ of ln µs, set by
	// finish where a backend has measurements: what counterfactual draws
	// centre on, computed once rather than per draw.
	traceMean, traceSigma [maxArms]float64
	oracle                int
	excluded              bool
	opaque                bool // its ops are outside the op catalogue
}

// scanner is pass 1: it learns the backends, buckets and distinct ops of a
// trace, and each bucket's measurements per backend, in memory bounded by
// the number of distinct ops and buckets, not events.
type scanner struct {
	o       *options
	in      *traceInput
	arms    []armInfo
	armIdx  map[string]int
	buckets []*bucketState
	bktIdx  map[string]int
	specs   map[string]*specEntry
	entries []*specEntry // by idx
	spool   spool        // the events, decoded, for pass 2
	meas    []measurement
	key     []byte
	ev      trace.Event // the event just read, reused
	ops     int64
	events  [maxArms]int64 // events naming each backend (as run or shadow)
	bad     int            // events skipped for bad content (-skip-bad)
	table   *sim.Table
}

func newScanner(o *options, in *traceInput, table *sim.Table) (*scanner, error) {
	s := &scanner{o: o, in: in, armIdx: map[string]int{}, bktIdx: map[string]int{}, specs: map[string]*specEntry{}, table: table}
	for _, info := range in.header.Backends {
		if _, err := s.arm(info.Name, &info); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// arm returns the index of the backend called name, adding it on first
// sight (info, when known, gives its kind and nominal figures).
func (s *scanner) arm(name string, info *backends.Info) (int, error) {
	if i, ok := s.armIdx[name]; ok {
		return i, nil
	}
	if len(s.arms) == maxArms {
		return 0, fmt.Errorf("%w: %s: more than %d backends (the %dth is %s)", errInput, s.in.name, maxArms, maxArms+1, input.Quote(name))
	}
	a := armInfo{name: name, tableCol: -1}
	prof, _ := sim.LookupProfile(strings.TrimPrefix(name, "sim:"))
	switch {
	case info != nil && info.Name != "":
		a.info = *info
		a.described = true
	case prof != nil:
		a.info = prof.Info()
		a.described = true
	default:
		a.info.Kind = backends.GPU
		if strings.HasPrefix(strings.ToLower(name), "cpu") {
			a.info.Kind = backends.CPU
		}
		a.info.SharedMemory = a.info.Kind == backends.CPU
	}
	a.info.Name = name
	a.gpu = a.info.Kind == backends.GPU
	if a.info.Nominal.GFLOPS == 0 {
		a.info.Nominal = defaultNominal(a.gpu, prof)
	}
	s.armIdx[name] = len(s.arms)
	s.arms = append(s.arms, a)
	return len(s.arms) - 1, nil
}

// defaultNominal are the figures of a backend the trace does not
// describe: its profile's when its name is one, else cpu2's for a CPU and
// the RLX cost model's ROCm defaults for a GPU, as sim.Table.Arms does.
func defaultNominal(gpu bool, prof *sim.Profile) backends.Nominal {
	switch {
	case prof != nil:
		return prof.Nominal
	case !gpu:
		return sim.MustProfile("cpu2").Nominal
	}
	return sim.RLXROCm
}

// appendKey appends what identifies e's op (and bucket) to b: strings
// with their lengths, numbers in binary, so that distinct ops have
// distinct keys and building one costs little (it runs per event).
func appendKey(b []byte, e *trace.Event) []byte {
	le := binary.LittleEndian
	b = binary.AppendUvarint(b, uint64(len(e.Op)))
	b = append(b, e.Op...)
	b = binary.AppendUvarint(b, uint64(len(e.DType)))
	b = append(b, e.DType...)
	b = binary.AppendUvarint(b, uint64(len(e.Bucket)))
	b = append(b, e.Bucket...)
	b = binary.AppendUvarint(b, uint64(len(e.Shape)))
	for _, sh := range e.Shape {
		b = binary.AppendUvarint(b, uint64(len(sh)))
		for _, d := range sh {
			b = le.AppendUint64(b, uint64(d))
		}
	}
	p := &e.Params
	c := byte(0)
	if p.Causal {
		c = 1
	}
	b = append(b, c)
	b = le.AppendUint32(b, math.Float32bits(p.Scale))
	b = le.AppendUint32(b, math.Float32bits(p.Eps))
	b = le.AppendUint32(b, math.Float32bits(p.RopeBase))
	b = le.AppendUint64(b, uint64(p.Pos))
	b = le.AppendUint64(b, uint64(p.FLOPs))
	b = le.AppendUint64(b, uint64(p.Bytes))
	return append(b, p.Name...)
}

// entry returns e's distinct op, creating it (and its bucket) on first
// sight; an invalid op is an error.
func (s *scanner) entry(e *trace.Event) (*specEntry, error) {
	s.key = appendKey(s.key[:0], e)
	if ent, ok := s.specs[string(s.key)]; ok {
		return ent, nil
	}
	spec, err := e.Spec()
	if err != nil {
		return nil, err
	}
	for i, sh := range spec.In { // e's shapes are the reader's buffers
		spec.In[i] = append(kernels.Shape(nil), sh...)
	}
	bname := e.Bucket
	if bname == "" {
		bname = kernels.BucketName(spec)
	}
	b, ok := s.bktIdx[bname]
	if !ok {
		b = len(s.buckets)
		s.bktIdx[bname] = b
		s.buckets = append(s.buckets, &bucketState{name: bname, oracle: -1})
	}
	ent := &specEntry{idx: int32(len(s.entries)), spec: spec, class: kernels.SizeClass(spec.Work())}
	ent.task = eval.NewTask(b, &ent.spec)
	s.specs[string(s.key)] = ent
	s.entries = append(s.entries, ent)
	if spec.Op == kernels.Opaque {
		s.buckets[b].opaque = true
	}
	return ent, nil
}

// maxUs bounds a measured duration (about 11.6 days): beyond it a
// figure is a corrupt record, and sums of such figures would overflow.
const maxUs = 1e12

// checkDurations rejects durations no measurement can have. NaN (null)
// and 0 mean "not measured".
func checkDurations(e *trace.Event) error {
	bad := func(us float64) bool { return us < 0 || us > maxUs }
	if bad(e.ActualUs) {
		return fmt.Errorf("actual_duration_us %v: want a duration in [0, %g] µs", e.ActualUs, maxUs)
	}
	for k, v := range e.Shadow {
		if bad(v) {
			return fmt.Errorf("shadow_us[%s] %v: want a duration in [0, %g] µs", input.Quote(k), v, maxUs)
		}
		if k == "" {
			return errors.New("shadow_us with an empty backend name")
		}
	}
	return nil
}

func measured(us float64) bool { return us > 0 && !math.IsInf(us, 0) }

// badLine formats an error about the event just read.
func badLine(in *traceInput, it eventIter, err error) error {
	if w, ok := it.(interface{ Where() string }); ok {
		return fmt.Errorf("%s: %s: %w", in.name, w.Where(), err)
	}
	return fmt.Errorf("%s:%d: %w", in.name, it.Line(), err)
}

// next returns the next event to replay and its op, skipping (with
// -skip-bad) or rejecting bad ones; io.EOF at the end or at -ops.
func (s *scanner) next(it eventIter, read *int64, bad *int) (*trace.Event, *specEntry, error) {
	for {
		if s.o.ops > 0 && *read >= int64(s.o.ops) {
			return nil, nil, io.EOF
		}
		ev := &s.ev
		if err := it.NextInto(ev); err != nil {
			return nil, nil, err
		}
		ent, err := s.entry(ev)
		if err == nil {
			err = checkDurations(ev)
		}
		if err != nil {
			if s.o.skipBad {
				*bad++
				continue
			}
			return nil, nil, badLine(s.in, it, err)
		}
		*read++
		return ev, ent, nil
	}
}

// scan is pass 1: it reads the trace, the only time it is parsed, and
// spools each event's op and measurements for pass 2.
func (s *scanner) scan() error {
	it, err := s.in.events()
	if err != nil {
		return err
	}
	for {
		if interrupted.Load() {
			return fmt.Errorf("%w during the first pass, after %d ops: nothing was replayed", errInterrupted, s.ops)
		}
		ev, ent, err := s.next(it, &s.ops, &s.bad)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		b := s.buckets[ent.task.Bucket]
		b.ops++
		ent.n++
		s.meas = s.meas[:0]
		if ev.Backend != "" {
			a, err := s.arm(ev.Backend, nil)
			if err != nil {
				return badLine(s.in, it, err)
			}
			s.events[a]++
			if measured(ev.ActualUs) {
				b.meas[a].add(ev.ActualUs)
				s.meas = append(s.meas, measurement{arm: uint8(a), src: srcMeasured, us: ev.ActualUs})
			}
		}
		for k, v := range ev.Shadow {
			a, err := s.arm(k, nil)
			if err != nil {
				return badLine(s.in, it, err)
			}
			if k != ev.Backend {
				s.events[a]++
			}
			if measured(v) {
				b.meas[a].add(v)
				if k != ev.Backend || !measured(ev.ActualUs) {
					s.meas = append(s.meas, measurement{arm: uint8(a), src: srcShadow, us: v})
				}
			}
		}
		if err := s.spool.add(ent.idx, s.meas); err != nil {
			return err
		}
	}
	s.bad += it.Skipped()
	return nil
}
