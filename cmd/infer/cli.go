package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/adaptsched/adaptsched/fleet"
)

// usageHint follows a usage error: the flags are one -h away.
const usageHint = "run infer -h for the flags"

// usageError is a bad flag or flag value: main prints it once (unless the
// flag package has, shown) with the hint, and exits 2.
type usageError struct {
	err   error
	shown bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// FleetSummary is fleet.Stats under snake_case keys, as the rest of
// Summary.
type FleetSummary struct {
	Connected bool   `json:"connected"`
	Synced    bool   `json:"synced"`
	Nodes     int    `json:"nodes"`
	Keys      int    `json:"keys"`
	Published uint64 `json:"published"`
	Received  uint64 `json:"received"`
	Malformed uint64 `json:"malformed"`
	Foreign   uint64 `json:"foreign"`
	Expired   uint64 `json:"expired"`
	Conflicts uint64 `json:"conflicts"`
	Errors    uint64 `json:"errors"`
	Limited   uint64 `json:"limited"`   // peers' values over the limits
	SetAside  uint64 `json:"set_aside"` // values of peers set aside
	Aside     int    `json:"peers_set_aside"`
}

func fleetSummary(st fleet.Stats) *FleetSummary {
	return &FleetSummary{Connected: st.Connected, Synced: st.Synced, Nodes: st.Nodes, Keys: st.Keys,
		Published: st.Published, Received: st.Received, Malformed: st.Malformed, Foreign: st.Foreign,
		Expired: st.Expired, Conflicts: st.Conflicts, Errors: st.Errors,
		Limited: st.Limited, SetAside: st.SetAside, Aside: st.Aside}
}

// exitCode prints err (once) and returns the exit status: 0, 2 for a
// usage error (as replay's), 1 for any other.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if !ue.shown {
			fmt.Fprintln(stderr, err)
			fmt.Fprintln(stderr, usageHint)
		}
		return 2
	}
	// Closers joined into one error often repeat one cause (the relay's
	// last write and the store's Close both return the store's fault):
	// each line once.
	seen := map[string]bool{}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !seen[line] {
			seen[line] = true
			fmt.Fprintln(stderr, line)
		}
	}
	return 1
}
