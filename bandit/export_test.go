package bandit

// ProbeOdds is probeOdds, for TestProbe.
const ProbeOdds = probeOdds

// SetNoSkip makes b always draw (TestSkipSameChoices).
func SetNoSkip(b *Bucket, on bool) { b.noSkip = on }
