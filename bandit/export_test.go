package bandit

// ProbeOdds is probeOdds, for TestProbe.
const ProbeOdds = probeOdds
