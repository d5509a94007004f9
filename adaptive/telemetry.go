package adaptive

import (
	"math"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
)

// Telemetry is a snapshot of what the Scheduler did and learned (DESIGN.md
// § Strategies and telemetry). The caller owns it.
type Telemetry struct {
	At       time.Time // Config.Now at the snapshot
	Backends []BackendTelemetry
	// Buckets are in BucketID order, then the shapes' own buckets
	// (Parent set) in the order they were made.
	Buckets []BucketTelemetry
	Links   []LinkTelemetry // one per direction of each backend with a link
	// Decisions counts Selects; Reasons counts them by reason.
	Decisions int64
	Reasons   map[Reason]int64
	// ExplorationShare is the fraction of decisions whose reason was
	// Explore (0 with no decisions).
	ExplorationShare float64
}

// BackendTelemetry is one backend's totals.
type BackendTelemetry struct {
	Name         string
	Kind         backends.Kind
	Decisions    int64         // ops Select placed here
	Ops          int64         // ops observed here (Observe)
	Time         time.Duration // total observed compute time
	ComputeUs    float64       // the same in µs, unrounded
	Switches     int64         // incumbent switches to this backend
	Explorations int64         // decisions here with reason Explore
	// Reasons counts Decisions by reason (index: Reason); they sum to
	// Decisions.
	Reasons [NumReasons]int64
}

// BucketTelemetry summarises one bucket.
type BucketTelemetry struct {
	Name string
	// Parent is the bucket of a shape that learns on its own (its Name is
	// the parent's and the shape's); "" for a bucket. A parent's
	// Observations include its shapes'; decisions are counted where they
	// were made.
	Parent       string
	Incumbent    string // "" before the first bandit choice
	Switches     int64
	Alarms       int64 // change alarms
	Observations int64 // in this process
	Arms         []ArmTelemetry
}

// ArmTelemetry is one backend's posterior in a bucket: the expected
// duration exp(μ + E[σ²]/2) in µs with a 90% credible interval from μ's
// Student-t marginal, and the observations behind it.
type ArmTelemetry struct {
	Backend        string
	MeanUs         float64
	Lo90Us, Hi90Us float64
	N              int64   // observations in this process
	Evidence       float64 // κ − κ0: pseudo-observations after discounting (stored ones included)
	// Warmup reports that the first of the N was a GPU's warm-up run,
	// counted but not learned from (Scheduler.Observe).
	Warmup bool
	// Learned is how many of the N the posterior learned from: not a
	// GPU's warm-up run, nor a shape's first run forgotten as a spike
	// (TestSpikeFirstShapeRun). A store holds as many for the arm.
	Learned int64
}

// LinkTelemetry is one link direction's current transfer model.
type LinkTelemetry struct {
	Backend   string
	ToDevice  bool
	LatencyUs float64
	GBps      float64
	Copies    int64 // copies observed
}

// interval returns the 90% credible interval of the expected duration
// exp(μ + E[σ²]/2) in µs: μ's marginal posterior is Student-t with 2α
// degrees of freedom, location Mu and scale √(β/(ακ)).
func interval(p bandit.NormalGamma) (lo, hi float64) {
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 2 * p.Alpha}
	q := t.Quantile(0.95) * math.Sqrt(p.Beta/(p.Alpha*p.Kappa))
	c := p.Mu + p.Variance()/2
	return math.Exp(c - q), math.Exp(c + q)
}

// addTotals adds arm a of bucket b (b.mu held) to its backend's totals,
// and its decisions by reason to reasons (nil: not wanted).
func (s *Scheduler) addTotals(bk *BackendTelemetry, b *bucket, a int, reasons *[NumReasons]int64) {
	if !b.isShape { // a shape's ops are its parent's too
		bk.Ops += b.per[a].ops
		bk.ComputeUs += b.per[a].timeUs
	}
	bk.Switches += int64(b.per[a].switchesTo)
	bk.Explorations += int64(b.per[a].picks[Explore])
	for r, c := range b.per[a].picks {
		bk.Decisions += int64(c)
		bk.Reasons[r] += int64(c)
		if reasons != nil {
			reasons[r] += int64(c)
		}
	}
}

// addOverflow adds the decisions that buckets' full counters handed to
// the engine (engine.record) to the backends' totals and to reasons.
func (s *Scheduler) addOverflow(bks []BackendTelemetry, reasons *[NumReasons]int64) {
	for a := range bks {
		for r := range NumReasons {
			c := s.e.picksOver[a][r].Load()
			bks[a].Decisions += c
			bks[a].Reasons[r] += c
			reasons[r] += c
			if r == Explore {
				bks[a].Explorations += c
			}
		}
	}
}

// Telemetry returns a snapshot. It locks each bucket briefly in turn, so it
// may run beside Select and Observe.
func (s *Scheduler) Telemetry() Telemetry {
	t := Telemetry{At: s.cfg.Now(), Reasons: map[Reason]int64{}}
	t.Backends = make([]BackendTelemetry, s.n)
	for a := range s.n {
		t.Backends[a] = BackendTelemetry{Name: s.names[a], Kind: s.kinds[a]}
	}
	var reasons [NumReasons]int64
	buckets, shapes := s.snapshot()
	for _, b := range append(buckets, shapes...) {
		b.mu.Lock()
		b.bb.Settle(&s.e.cfg)
		bt := BucketTelemetry{Name: b.name, Switches: int64(b.bb.Switches), Alarms: int64(b.bb.Alarms)}
		if b.isShape {
			bt.Parent = b.parent.name
		}
		if inc := b.bb.Incumbent; inc >= 0 {
			bt.Incumbent = s.names[inc]
		}
		for a := range s.n {
			p := b.bb.Arms[a]
			lo, hi := interval(p)
			bt.Arms = append(bt.Arms, ArmTelemetry{
				Backend: s.names[a], MeanUs: p.MeanUs(), Lo90Us: lo, Hi90Us: hi,
				N: b.per[a].ops, Evidence: p.Kappa - b.bb.Priors[a].Kappa, Warmup: b.warmed.Has(a),
				Learned: b.per[a].learned,
			})
			bt.Observations += b.per[a].ops
			s.addTotals(&t.Backends[a], b, a, &reasons)
		}
		b.mu.Unlock()
		t.Buckets = append(t.Buckets, bt)
	}
	s.addOverflow(t.Backends, &reasons)
	for a := range t.Backends {
		t.Backends[a].Time = time.Duration(t.Backends[a].ComputeUs * float64(time.Microsecond))
	}
	for r := UserPreference; r < NumReasons; r++ {
		if reasons[r] > 0 {
			t.Reasons[r] = reasons[r]
		}
		t.Decisions += reasons[r]
	}
	if t.Decisions > 0 {
		t.ExplorationShare = float64(reasons[Explore]) / float64(t.Decisions)
	}
	for a := range s.n {
		for dir, l := range s.links[a] {
			if l == nil {
				continue
			}
			lat, gbps := l.Figures()
			n := l.Copies()
			t.Links = append(t.Links, LinkTelemetry{Backend: s.names[a], ToDevice: dir == 0, LatencyUs: lat, GBps: gbps, Copies: n})
		}
	}
	return t
}
