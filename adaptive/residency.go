package adaptive

import (
	"math"
	"math/bits"
)

// MaxBackends is the most backends one Scheduler chooses among: decisions
// and residency masks are fixed arrays and bitmasks of this size, so that
// the hot path does not allocate.
const MaxBackends = 8

// Mask is a set of backends: bit i is Config.Backends[i]. Host (bit 15)
// stands for host memory in a Residency.
type Mask uint16

// Host marks data in host memory: resident on every backend whose device
// reads host memory directly (Info.SharedMemory).
const Host Mask = 1 << 15

// Backend returns the mask holding only backend i.
func Backend(i int) Mask { return 1 << uint(i) }

// Has reports whether backend i is in m.
func (m Mask) Has(i int) bool { return m&(1<<uint(i)) != 0 }

// Count returns the number of backends in m (Host not counted).
func (m Mask) Count() int { return bits.OnesCount16(uint16(m &^ Host)) }

// MaxInputs is the number of residency entries one Residency holds.
const MaxInputs = 8

// Input is one entry of a Residency: Bytes of input that sit on the
// backends in On (On == 0 means host memory only). Weight marks a weight
// whose residency differs from op to op of a bucket (a MoE's experts, a
// cache's choice): its copy is priced at face value, outside the
// hysteresis margin (bandit.Bucket.ChooseCopies).
type Input struct {
	On     Mask
	Weight bool
	Bytes  int64
}

// Residency tells Select where an op's inputs are, so that each backend's
// cost includes moving what it lacks (DESIGN.md § The data path). Entries
// need not be one per input: inputs with the same residency may be summed
// into one entry, which is how an op with more than MaxInputs inputs is
// described. The zero Residency means every input is resident everywhere
// (no transfer is charged). A Residency is a value: building one does not
// allocate.
type Residency struct {
	N      int // entries in use
	Inputs [MaxInputs]Input
	// Consumers is where the output's previous value was read: the
	// backends whose ops read it, and Host when the program did. The
	// Executor fills it for a tensor written again (a decode loop's
	// activations), and each backend is charged moving the output there.
	// 0 means unknown: then a backend that pulls inputs away from where
	// they live is charged sending its output back.
	Consumers Mask
	// QueueUs[i] is the expected µs until backend i's queue is free (the
	// predicted durations of its queued, unfinished work: StarPU dmda's
	// expected start time). Select adds it to that arm's cost as it adds
	// a priced transfer, so that work spreads over idle devices. Zero: no
	// wait.
	QueueUs [MaxBackends]float32
}

// Add records bytes of input resident on the backends in on. When the
// table is full they are merged into the last entry, which then counts as
// resident only where both were (host memory when they share nothing), so
// merging can raise the predicted transfer but never hide one.
func (r *Residency) Add(on Mask, bytes int64) { r.add(on, bytes, false) }

// AddWeight is Add for a weight (Input.Weight). Merged with an input that
// is not one, the entry is not a weight: its copy is then priced inside
// the margin, as before the weight was told apart.
func (r *Residency) AddWeight(on Mask, bytes int64) { r.add(on, bytes, true) }

func (r *Residency) add(on Mask, bytes int64, weight bool) {
	if r.N < MaxInputs {
		r.Inputs[r.N] = Input{On: on, Weight: weight, Bytes: bytes}
		r.N++
		return
	}
	last := &r.Inputs[MaxInputs-1]
	// The sum saturates and takes no non-positive bytes (priced as none
	// unmerged): wrapped below zero, or lowered, it would hide the
	// entry's transfer (TestResidencyAddOverflow).
	if bytes > 0 {
		if last.Bytes > math.MaxInt64-bytes {
			last.Bytes = math.MaxInt64
		} else {
			last.Bytes = max(last.Bytes, 0) + bytes
		}
	}
	last.Weight = last.Weight && weight
	if on == 0 {
		on = Host
	}
	if last.On == 0 {
		last.On = Host
	}
	if last.On &= on; last.On == 0 {
		last.On = Host
	}
}

// Lacking returns, for each of n backends, the bytes of r's inputs not
// resident there: an input is resident on the backends in its On and,
// when it sits in host memory or on a backend in shared (those that read
// host memory), on every backend in shared. It is the rule Select prices
// transfers by (Scheduler.move), in bytes, for a placement that prices
// them itself.
func (r *Residency) Lacking(shared Mask, n int) (out [MaxBackends]float64) {
	for i := range min(r.N, MaxInputs) {
		in := r.Inputs[i]
		if in.Bytes <= 0 {
			continue
		}
		on := in.On
		if on == 0 {
			on = Host
		}
		for a := range min(n, MaxBackends) {
			if on.Has(a) || shared.Has(a) && on&(Host|shared) != 0 {
				continue
			}
			out[a] += float64(in.Bytes)
		}
	}
	return out
}
