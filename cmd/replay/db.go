package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/internal/clilog"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/rs/zerolog"
)

// storeSetup is what -db needs besides the arms: the fingerprint that
// scopes the posteriors ("" takes the arms' own) and where warnings go.
type storeSetup struct {
	fingerprint string
	log         io.Writer
}

// specSetter is a policy that needs the op itself, not only its Task:
// the replay gives it the op before each Choose.
type specSetter interface {
	setSpec(s *kernels.Spec)
}

// storePolicy is "thompson" with -db: adaptive.NewThompson takes no
// store, so this is the Scheduler itself (the same bucket logic, priors
// and tuning), over stand-in backends named like the replay's, loading
// its posteriors from the store at the start and saving them on every
// observation and at the end. Its posteriors are keyed by backend name and
// adaptive.BucketName, as a deployed Scheduler keys them, so a store that
// a production run wrote warm-starts a replay of its trace and the other
// way round.
type storePolicy struct {
	s      *adaptive.Scheduler
	db     *history.DB
	spec   *kernels.Spec
	d      adaptive.Decision
	loaded int
	err    error
}

var (
	_ bandit.Policy    = (*storePolicy)(nil)
	_ specSetter       = (*storePolicy)(nil)
	_ backends.Backend = standIn{}
)

func newStorePolicy(o *options, arms []bandit.Arm, st *storeSetup) (*storePolicy, error) {
	bs := make([]backends.Backend, len(arms))
	infos := make([]backends.Info, len(arms))
	for i, a := range arms {
		kind := backends.CPU
		if a.GPU {
			kind = backends.GPU
		}
		n := a.Nominal
		infos[i] = backends.Info{Name: a.Name, Kind: kind, Platform: "replay", Model: a.Name, Runtime: "replay",
			SharedMemory: !a.GPU || n.LinkGBps == 0,
			Nominal:      backends.Nominal{GFLOPS: n.GFLOPS, MemGBps: n.MemGBps, DispatchUs: n.DispatchUs, LinkGBps: n.LinkGBps, LinkLatencyUs: n.LinkLatencyUs}}
		bs[i] = standIn{info: infos[i]}
	}
	fp := history.FingerprintOf(infos)
	if st != nil && st.fingerprint != "" {
		fp = history.Fingerprint{Hash: st.fingerprint, Desc: "trace fingerprint " + st.fingerprint}
	}
	logw := io.Discard
	if st != nil && st.log != nil {
		logw = st.log
	}
	db, err := history.Open(history.DefaultOptions(o.db).WithFingerprint(fp).WithMoveDamaged(o.resetStore).
		WithLogger(clilog.New(logw, o.logJSON, zerolog.WarnLevel)))
	if err != nil {
		return nil, fmt.Errorf("replay: -db: %w", err)
	}
	sp := &storePolicy{db: db}
	db.Load(func(history.Key, bandit.NormalGamma) { sp.loaded++ })
	sp.s, err = adaptive.New(adaptive.Config{Backends: bs, Bandit: o.bandit, Store: db, Seed: o.seed,
		NoCalibration: true, CalibrationFile: "-", Shards: 8})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replay: -db: %w", err)
	}
	return sp, nil
}

func (p *storePolicy) Name() string { return "thompson" }

func (p *storePolicy) setSpec(s *kernels.Spec) { p.spec = s }

// Choose implements bandit.Policy for the op last given to setSpec; a
// Scheduler error (which the replay's validated ops cannot cause) is kept
// for close and answered with backend 0.
func (p *storePolicy) Choose(*bandit.Task) int {
	d, err := p.s.Select(*p.spec, adaptive.Residency{})
	if err != nil {
		p.err = errors.Join(p.err, err)
		p.d = adaptive.Decision{Backend: -1}
		return 0
	}
	p.d = d
	return d.Backend
}

// Observe implements bandit.Policy.
func (p *storePolicy) Observe(_ *bandit.Task, arm int, us float64) {
	if p.d.Backend != arm {
		return
	}
	if err := p.s.Observe(p.d, backends.Timing{Duration: time.Duration(us * float64(time.Microsecond)), Clock: backends.Simulated}); err != nil {
		p.err = errors.Join(p.err, err)
	}
}

// close saves every posterior and closes the store.
func (p *storePolicy) close() error {
	err := errors.Join(p.err, p.s.Close(), p.db.Close())
	if err != nil {
		return fmt.Errorf("replay: -db %w", err)
	}
	return nil
}

// standIn is a backend that only describes itself: the Scheduler under
// storePolicy calls Info and Supports, nothing else (no calibration).
type standIn struct{ info backends.Info }

func (b standIn) Info() backends.Info         { return b.info }
func (b standIn) Supports(kernels.Spec) error { return nil }
func (b standIn) Alloc(int64) (backends.Buffer, error) {
	return nil, fmt.Errorf("%w: replay stand-in %s runs nothing", backends.ErrUnsupported, b.info.Name)
}
func (b standIn) Write(backends.Buffer, []byte) (backends.Timing, error) {
	return backends.Timing{}, fmt.Errorf("%w: replay stand-in %s runs nothing", backends.ErrUnsupported, b.info.Name)
}
func (b standIn) Read([]byte, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, fmt.Errorf("%w: replay stand-in %s runs nothing", backends.ErrUnsupported, b.info.Name)
}
func (b standIn) Run(kernels.Spec, []backends.Buffer, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, fmt.Errorf("%w: replay stand-in %s runs nothing", backends.ErrUnsupported, b.info.Name)
}
func (b standIn) Close() error { return nil }
