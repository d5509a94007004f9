package rocm

// GraphStats counts what gatherings did, for tests and reports.
type GraphStats struct {
	Launches int64 // gatherings launched
	Kernels  int64 // kernels in them
	Builds   int64 // graphs built
	Replays  int64 // launches that replayed the last graph
	Updated  int64 // nodes given new arguments before a replay
	OneByOne int64 // gatherings launched kernel by kernel (no graph)
	DeviceNs int64 // the gatherings' time on the device, by their events
	// NoGraphs is why graphs are not used (empty while they are).
	NoGraphs string
}
