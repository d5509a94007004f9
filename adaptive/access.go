package adaptive

// Read-only views of a Scheduler's configuration, for a caller that runs
// the ops itself (package executor) and so needs the backends as the
// Scheduler sees them rather than copies of its own. None allocates.

// BackendName returns backend i's Info().Name (Config.Backends order), or
// "" for an index out of range. It does not allocate.
func (s *Scheduler) BackendName(i int) string {
	if i < 0 || i >= s.n {
		return ""
	}
	return s.names[i]
}

// Shared returns the backends that read host memory directly (a CPU, or
// Info().SharedMemory): their copies are not modelled as transfers and
// they have no link for ObserveTransferAt.
func (s *Scheduler) Shared() Mask { return s.shared }

// Allowed returns the backends that the strategy may place an op on:
// Only's backend alone under Only, else every configured backend.
func (s *Scheduler) Allowed() Mask {
	if s.only >= 0 {
		return Backend(s.only)
	}
	return Backend(s.n) - 1
}
