package eval

// tally counts a run's decisions: by arm and bucket, the switches of each
// bucket and shape, and those off the oracle's assignment.
type tally struct {
	counts      []int64
	perBucket   [][]int64
	last        []int32 // each bucket's last arm, -1 before its first op
	lastOfShape []int32 // each shape's last arm, -1 before its first op
	offOracle   int64
}

func newTally(arms, buckets, shapes int) *tally {
	tl := &tally{counts: make([]int64, arms), perBucket: make([][]int64, buckets),
		last: make([]int32, buckets), lastOfShape: make([]int32, shapes)}
	for b := range tl.perBucket {
		tl.perBucket[b] = make([]int64, arms)
		tl.last[b] = -1
	}
	for k := range tl.lastOfShape {
		tl.lastOfShape[k] = -1
	}
	return tl
}

// add counts arm a chosen for an op of bucket b and shape key k into tl
// and res's switches.
func (tl *tally) add(res *Result, b int32, k int32, a int, offOracle bool) {
	tl.counts[a]++
	tl.perBucket[b][a]++
	if l := tl.last[b]; l >= 0 && int(l) != a {
		res.Switches++
	}
	tl.last[b] = int32(a)
	if l := tl.lastOfShape[k]; l >= 0 && int(l) != a {
		res.ShapeSwitches++
	}
	tl.lastOfShape[k] = int32(a)
	if offOracle {
		tl.offOracle++
	}
}

// copiesUs returns the µs of moving ins to arm a in segment s, reporting
// each copy to xo when it is not nil.
func (e *Env) copiesUs(ins []input, a, s int, xo TransferObserver) float64 {
	var x float64
	for _, in := range ins {
		xi := e.linkUs(in.bytes, in.arm, a, s)
		if xo != nil && xi > 0 {
			e.reportCopies(xo, in.bytes, in.arm, a, s)
		}
		x += xi
	}
	return x
}

// reportCopies tells xo of the copies that moved bytes from arm from (-1:
// host memory) to arm to: one over each end's link, as the Executor
// reports each measured copy.
func (e *Env) reportCopies(xo TransferObserver, bytes int64, from, to, s int) {
	if from >= 0 {
		if us := e.arms[from].Profile.LinkUs(bytes) * e.linkF[s][from]; us > 0 {
			xo.ObserveTransfer(from, false, bytes, us)
		}
	}
	if us := e.arms[to].Profile.LinkUs(bytes) * e.linkF[s][to]; us > 0 {
		xo.ObserveTransfer(to, true, bytes, us)
	}
}
